#!/bin/sh
# The official image's entrypoint: flags alone mean haproxy's; haproxy runs as master-worker
# (-W: reload on SIGUSR2) in the foreground (-db).
set -e
if [ "${1#-}" != "$1" ]; then
    set -- haproxy "$@"
fi
if [ "$1" = haproxy ]; then
    shift
    set -- haproxy -W -db "$@"
fi
exec "$@"
