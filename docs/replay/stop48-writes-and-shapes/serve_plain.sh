#!/bin/bash
# serve_plain.sh TREE PORT STATE: reame serve from a worktree on a given state directory (kept across a restart)
T=$1; P=$2; S=$3; shift 3
mkdir -p /tmp/t34 && cd /tmp/t34 && REAME_STATE_DIR=$S PYTHONPATH=$T/app:$T/bench exec python3 -c "import sys; from reame.cli.main import main; sys.argv[0]='reame'; main()" serve "${MODEL:?MODEL: the .gguf to serve}" --port $P --threads 2 --parallel 4 --context-length 4096 "$@"
