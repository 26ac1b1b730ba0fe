#!/bin/bash
# bench17.sh TREE OUT: issue 34's thinking bench at the Qwen3 1.7B shape (synthetic; SHAPE=qwen3.5-2b for another), Reame from TREE
# beside /opt/llama-build/bin/llama-server; then ../stop48-writes-and-shapes/medians.py and requests.py read OUT
T=$1; O=$2; W=$(mktemp -d); cp $T/tests/templates/chatml-think-open.jinja $W/; cd $W
PYTHONPATH=$T/app:$T/bench REAME_REASONING_BUDGET=4 python3 -m reame.cli.main bench --replay --synthetic ${SHAPE:-qwen3-1.7b} --traces thinking --requests 12 --max-tokens ${MAX_TOKENS:-32} --users 1 --threads 2 --parallel 4 --context-length 4096 --chat-template-file chatml-think-open.jinja --llama-server /opt/llama-build/bin/llama-server --out $O > $O.log 2>&1
echo rc=$? >> $O.log
