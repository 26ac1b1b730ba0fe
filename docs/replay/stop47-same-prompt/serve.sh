#!/bin/bash
# serve.sh TREE PORT [extra reame serve flags] : a fresh reame serve from a worktree
T=$1; P=$2; shift 2
S=$(mktemp -d /tmp/rag/state-XXXX)
cd /tmp && REAME_STATE_DIR=$S PYTHONPATH=$T/app:$T/bench exec python3 -c "import sys; from reame.cli.main import main; sys.argv[0]='reame'; main()" serve "$(cat /tmp/rag/model)" --port $P --threads 2 --parallel 4 --context-length 4096 "$@"
