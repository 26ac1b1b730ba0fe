#!/bin/bash
# serve_traced.sh TREE PORT STATE [FLAGS]: trace_path.py serving MODEL with the thinking template
# (../stop49-queue-bound/oneclient.sh's SERVE argument); the trace goes to TRACE_OUT.
T=$1; P=$2; S=$3; shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
REAME_REASONING_BUDGET=4 REAME_STATE_DIR=$S PYTHONPATH=$T/app:$T/bench exec python3 "$HERE/trace_path.py" \
  serve "${MODEL:?}" --port $P --threads 2 --parallel 4 --context-length 4096 \
  --chat-template-file "$T/tests/templates/chatml-think-open.jinja" "$@" 2> "${TRACE_OUT:?}"
