#!/bin/bash
# oneclient.sh TREE OUT [SERVE]: the thinking trace, one client, no restart; MODEL (default the
# 1.7B shape), REQUESTS (12) and MAX_TOKENS (32) from the environment, which passes through to
# the server. SERVE: ../stop48-writes-and-shapes/serve_timed_s.sh times every decode and state read.
T=$1; O=$2; P=8393; S=$O/state; rm -rf "$O"; mkdir -p "$O" /tmp/t34
D=$(cd "$(dirname "$0")/../stop48-writes-and-shapes" && pwd)
export MODEL=${MODEL:-$HOME/.cache/reame/state/synthetic/synthetic-qwen3-1.7b-Q4_K_M.gguf}
N=${REQUESTS:-12}; MT=${MAX_TOKENS:-32}
cp "$T/tests/templates/chatml-think-open.jinja" /tmp/t34/
SERVE=${3:-$D/serve_plain.sh}
if [ "$SERVE" = "$D/serve_plain.sh" ]; then X="--chat-template-file /tmp/t34/chatml-think-open.jinja"; else X=""; fi
REAME_REASONING_BUDGET=4 bash $SERVE "$T" $P "$S" $X >>"$O/serve.log" 2>&1 &
echo $! >"$O/pid"
for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && break; sleep 1; done
TRACE=thinking PYTHONPATH=$T/bench python3 "$D/drive2.py" http://127.0.0.1:$P "$O/out.json" 1 $N $N $MT "$O/conv.json" > "$O/drive.txt"
kill -TERM "$(cat "$O/pid")"; while kill -0 "$(cat "$O/pid")" 2>/dev/null; do sleep 0.5; done
python3 - "$O" <<'PY'
import json, statistics, sys
r = [x for x in json.load(open(sys.argv[1] + "/out.json")) if x["turn"] > 1]
print(sys.argv[1], f"later turns: median first token {statistics.median(x['ttft'] for x in r):.3f} s, computed {[x['prompt']-x['cached'] for x in r]}")
PY
rm -rf "$S"
