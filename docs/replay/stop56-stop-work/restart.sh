#!/bin/bash
# restart.sh TREE OUT: the thinking trace, one client, Reame alone (../stop54-first-token's traced
# server, MODEL: default the Qwen3 1.7B shape), stopped after request 6 and started again on its
# state directory, as issue 34's bench does; each server's trace in OUT/trace-{1,2}.err.
T=$1; O=$2; P=8394; S=$O/state; rm -rf "$O"; mkdir -p "$O"
H=$(cd "$(dirname "$0")/.." && pwd)
export MODEL=${MODEL:-$HOME/.cache/reame/state/synthetic/synthetic-qwen3-1.7b-Q4_K_M.gguf}
for half in ${HALVES:-1 2}; do
  TRACE_OUT=$O/trace-$half.err bash "$H/stop54-first-token/serve_traced.sh" "$T" $P "$S" >>"$O/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && break; sleep 1; done
  if [ $half = 1 ]; then a=1; b=6; else a=7; b=12; fi
  TRACE=thinking PYTHONPATH=$T/bench python3 "$H/stop48-writes-and-shapes/drive2.py" http://127.0.0.1:$P \
    "$O/out.json" $a $b 12 32 "$O/conv.json" >>"$O/drive.txt"
  kill -TERM $pid; while kill -0 $pid 2>/dev/null; do sleep 0.5; done
done
cat "$O/drive.txt"; [ -n "$KEEP_STATE" ] || rm -rf "$S"
