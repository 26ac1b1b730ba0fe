#!/bin/bash
# (each llama_decode and state read timed into /tmp/t34/steps.log)
# serve_timed_s.sh TREE PORT STATE: a timed reame serve on a given state directory
T=$1; P=$2; S=$3; shift 3
mkdir -p /tmp/t34 && cd /tmp/t34 && REAME_REASONING_BUDGET=4 REAME_STATE_DIR=$S PYTHONPATH=$T/app:$T/bench exec python3 $T/docs/replay/stop35-thinking/timed_serve.py serve "${MODEL:?MODEL: the .gguf to serve}" --port $P --threads 2 --parallel 4 --context-length 4096 --chat-template-file "$T/tests/templates/chatml-think-open.jinja" "$@"
