#!/bin/bash
# restart17.sh TREE OUT: the thinking trace on the Qwen3 1.7B shape, one client: requests 1-6,
# SIGTERM (the writer flushes its queue), the server started again on the same state directory,
# requests 7-12. Writes OUT/out.json (every request), OUT/metrics.1 (the writer's counters
# before the restart); the state directory is removed at the end.
T=$1; O=$2; P=8391; S=$O/state; rm -rf "$O"; mkdir -p "$O" /tmp/t34
D=$(cd "$(dirname "$0")/../stop48-writes-and-shapes" && pwd)
export MODEL=${MODEL:-$HOME/.cache/reame/state/synthetic/synthetic-qwen3-1.7b-Q4_K_M.gguf}
cp "$T/tests/templates/chatml-think-open.jinja" /tmp/t34/
up() {
  REAME_REASONING_BUDGET=4 bash "$D/serve_plain.sh" "$T" $P "$S" \
    --chat-template-file /tmp/t34/chatml-think-open.jinja >>"$O/serve.log" 2>&1 &
  echo $! >"$O/pid"
  for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && return; sleep 1; done
  echo "no server"; exit 1
}
down() {
  curl -s http://127.0.0.1:$P/metrics | grep -E "^reame_prefix_cache_(write|snapshots)" >"$O/metrics.$1"
  kill -TERM "$(cat "$O/pid")"; while kill -0 "$(cat "$O/pid")" 2>/dev/null; do sleep 0.5; done
}
drive() { TRACE=thinking PYTHONPATH=$T/bench python3 "$D/drive2.py" http://127.0.0.1:$P "$O/out.json" "$1" "$2" 12 32 "$O/conv.json"; }
up; drive 1 6; down 1
up; drive 7 12; down 2
python3 - "$O" <<'PY'
import json, statistics, sys
records = [r for r in json.load(open(sys.argv[1] + "/out.json")) if r["i"] > 6]
computed = [r["prompt"] - r["cached"] for r in records]
ttft = statistics.median(r["ttft"] for r in records)
print(f"after the restart: prompt tokens computed {sum(computed)} {computed}, median first token {ttft:.3f} s")
PY
grep drops "$O/metrics.1"
rm -rf "$S"  # NOTE: a 1.7B run leaves about 1.2 GB of states
