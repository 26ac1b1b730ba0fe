#!/usr/bin/env bash
# A Docker engine on a machine that reaches Debian's mirror and PyPI but no container registry:
# dockerd from Debian's docker.io, and debian:bookworm-slim made locally with debootstrap and
# imported under that exact name, so docker/Dockerfile builds unchanged. Also Prometheus from
# Debian (the dashboard test scrapes a real Reame with it), and redis-server and HAProxy (the
# shared tier's and the cluster's tests run them on loopback). Idempotent.
set -euo pipefail

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null \
    || ! command -v prometheus >/dev/null || ! command -v redis-server >/dev/null \
    || ! command -v haproxy >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        docker.io debootstrap prometheus redis-server haproxy iptables ca-certificates >/dev/null
fi

# NOTE: Debian's client (20.10) builds with the engine's own BuildKit; a newer client on PATH
# wants the buildx plugin, which no registry here provides.
DOCKER=/usr/bin/docker
if ! "$DOCKER" info >/dev/null 2>&1; then
    nohup dockerd >/tmp/dockerd.log 2>&1 &
    for _ in $(seq 60); do "$DOCKER" info >/dev/null 2>&1 && break; sleep 1; done
    "$DOCKER" info >/dev/null || { tail -20 /tmp/dockerd.log; exit 1; }
fi

if ! "$DOCKER" image inspect debian:bookworm-slim >/dev/null 2>&1; then
    rootfs=$(mktemp -d)
    debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
    tar -C "$rootfs" -c . | "$DOCKER" import - debian:bookworm-slim >/dev/null
    rm -rf "$rootfs"
fi
echo "docker engine ready: $("$DOCKER" version --format '{{.Server.Version}}'), debian:bookworm-slim present"
