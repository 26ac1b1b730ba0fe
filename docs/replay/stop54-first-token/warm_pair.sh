#!/usr/bin/env bash
# warm_pair.sh BEFORE_TREE AFTER_TREE OUT [RUNS]: warm_ttft.py against `reame serve` from each
# tree in turn (a new server on an empty cache each run, SmolLM2, 2 threads, 4 sequences).
set -euo pipefail
before=$1 after=$2 out=$3 runs=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for i in $(seq "$runs"); do
  for side in before after; do
    tree=$before; [ "$side" = after ] && tree=$after
    state=$(mktemp -d)
    REAME_STATE_DIR=$state REAME_PREFIX_CACHE_DIR=$state/cache PYTHONPATH=$tree/app \
      reame serve --threads 2 --parallel 4 --context-length 4096 --port 8092 > "$out/serve-$side-$i.log" 2>&1 &
    pid=$!
    for _ in $(seq 120); do curl -sf http://127.0.0.1:8092/health > /dev/null && break; sleep 1; done
    python3 "$here/warm_ttft.py" http://127.0.0.1:8092 "$out/$side-$i.json"
    kill -TERM $pid; wait $pid || true
    rm -rf "$state"
  done
done
