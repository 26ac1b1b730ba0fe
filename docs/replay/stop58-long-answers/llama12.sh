#!/bin/bash
# llama12.sh TREE OUT: run12.sh's 12 requests (MAX_TOKENS, PAUSE) against llama-server
# (LLAMA_SERVER) on the same model, template, budget, threads and slots as issue 34's bench;
# OUT/out.json as run12.sh's. later.py reads both.
T=$1; O=$2; P=8395; rm -rf "$O"; mkdir -p "$O"
R=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${MODEL:-$HOME/.cache/reame/state/synthetic/synthetic-qwen3-1.7b-Q4_K_M.gguf}
${LLAMA_SERVER:-/opt/llama-build/bin/llama-server} -m "$MODEL" -t 2 -c 16384 -np 4 --port $P \
  --chat-template-file "$T/tests/templates/chatml-think-open.jinja" --reasoning-format deepseek \
  --reasoning-budget 4 >"$O/server.log" 2>&1 &
pid=$!
for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && break; sleep 1; done
FRESH_CONNECTIONS=1 PAUSE=${PAUSE:-1} TRACE=thinking PYTHONPATH=$T/bench python3 "$R/stop48-writes-and-shapes/drive2.py" \
  http://127.0.0.1:$P "$O/out.json" 1 12 12 "${MAX_TOKENS:-32}" "$O/conv.json" >>"$O/drive.txt" 2>"$O/drive.err"
kill -TERM $pid; wait $pid 2>/dev/null
cat "$O/drive.txt"
