#!/usr/bin/env bash
# The appliance image, and llama-cpp-python's wheel out of the same build: the host installs
# that wheel, so CI compiles llama.cpp once. Usage: build-image.sh WHEEL_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:?usage: build-image.sh WHEEL_DIR}
ca=/etc/ssl/certs/ca-certificates.crt
build() {
    DOCKER_BUILDKIT=1 /usr/bin/docker build --progress=plain -f docker/Dockerfile \
        --secret "id=ca_certs,src=$ca" "$@" .
}
build -t "${REAME_IMAGE:-reame:local}" >/tmp/docker-build.log 2>&1 \
    || { tail -40 /tmp/docker-build.log; exit 1; }
rm -rf "$wheels"
build --target wheels -o "type=local,dest=$wheels" >>/tmp/docker-build.log 2>&1 \
    || { tail -40 /tmp/docker-build.log; exit 1; }
ls "$wheels"
