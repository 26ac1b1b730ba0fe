#!/bin/bash
# run12.sh TREE OUT: the thinking trace at the Qwen3 1.7B shape (MODEL), one client, Reame from
# TREE alone and traced (trace_writes.py), its 12 requests straight through; OUT/trace.err,
# OUT/out.json (each request's first token and tokens computed). waits.py OUT reads them.
T=$1; O=$2; P=8394; S=$O/state; rm -rf "$O"; mkdir -p "$O"
H=$(cd "$(dirname "$0")" && pwd); R=$(dirname "$H")
export MODEL=${MODEL:-$HOME/.cache/reame/state/synthetic/synthetic-qwen3-1.7b-Q4_K_M.gguf}
REAME_REASONING_BUDGET=4 REAME_STATE_DIR=$S PYTHONPATH=$T/app:$T/bench python3 "$H/trace_writes.py" \
  serve "$MODEL" --port $P --threads 2 --parallel 4 --context-length 4096 \
  --chat-template-file "$T/tests/templates/chatml-think-open.jinja" 2>"$O/trace.err" >>"$O/serve.log" &
pid=$!
for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && break; sleep 1; done
PAUSE=${PAUSE:-1} TRACE=thinking PYTHONPATH=$T/bench python3 "$R/stop48-writes-and-shapes/drive2.py" http://127.0.0.1:$P \
  "$O/out.json" 1 12 12 ${MAX_TOKENS:-32} "$O/conv.json" >>"$O/drive.txt"
kill -TERM $pid; while kill -0 $pid 2>/dev/null; do sleep 0.5; done
cat "$O/drive.txt"; rm -rf "$S"
