#!/usr/bin/env bash
# Opt-in (not part of .ci/run): docker/Dockerfile built for linux/arm64 under QEMU emulation.
# No registry here, so the arm64 debian:bookworm-slim is made with debootstrap and labelled
# arm64 (docker import records the host's architecture). podman would build both platforms
# into one manifest list, but its runc cannot set rlimits in this sandbox; the engine's own
# BuildKit can. An emulated compile of every arm64 CPU variant takes hours on 2 cores:
# LLAMA_CMAKE_ARGS narrows it, e.g. "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod".
# Usage: build-arm64.sh [TAG]   (default reame:local-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-reame:local-arm64}
base=reame-base/debian:bookworm-slim-arm64

if [ ! -e /usr/bin/qemu-aarch64-static ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        qemu-user-static binfmt-support debootstrap >/dev/null
fi
mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64

if [ "$(docker image inspect "$base" --format '{{.Architecture}}' 2>/dev/null)" != arm64 ]; then
    work=$(mktemp -d)
    debootstrap --variant=minbase --arch=arm64 bookworm "$work/rootfs" http://deb.debian.org/debian >/dev/null
    tar -C "$work/rootfs" -c . | docker import - "$base" >/dev/null
    mkdir "$work/image" && docker save "$base" | tar -x -C "$work/image"
    python3 - "$work/image" "$base" <<'PY'
import hashlib, json, os, sys
root, tag = sys.argv[1], sys.argv[2]
manifest = json.load(open(f"{root}/manifest.json"))
config = json.load(open(f"{root}/{manifest[0]['Config']}"))
os.remove(f"{root}/{manifest[0]['Config']}")
config.update(architecture="arm64", variant="v8")
data = json.dumps(config).encode()
name = hashlib.sha256(data).hexdigest() + ".json"
open(f"{root}/{name}", "wb").write(data)
manifest[0].update(Config=name, RepoTags=[tag])
json.dump(manifest, open(f"{root}/manifest.json", "w"))
PY
    tar -C "$work/image" -c . | docker load >/dev/null
    rm -rf "$work"
fi

DOCKER_BUILDKIT=1 /usr/bin/docker build --progress=plain --platform linux/arm64 \
    -f docker/Dockerfile -t "$tag" --build-arg "BASE_IMAGE=$base" \
    ${LLAMA_CMAKE_ARGS:+--build-arg "LLAMA_CMAKE_ARGS=$LLAMA_CMAKE_ARGS"} \
    --secret id=ca_certs,src=/etc/ssl/certs/ca-certificates.crt .
docker run --rm --platform linux/arm64 --entrypoint sh "$tag" -c 'uname -m; reame --version'
