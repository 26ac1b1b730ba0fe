#!/usr/bin/env bash
# think_pair.sh TREE OUT: issue 34's thinking bench, Reame's server from TREE, beside the
# llama-server at LLAMA_SERVER (default /tmp/llama-build/bin/llama-server). Then
# `python3 docs/replay/stop48-writes-and-shapes/medians.py OUT` prints the later turns.
set -euo pipefail
tree=$1 out=$2
work=$(mktemp -d)
cp "$tree/tests/templates/chatml-think-open.jinja" "$work/"
cd "$work"
PYTHONPATH=$tree/app REAME_REASONING_BUDGET=4 reame bench --replay --traces thinking --requests 20 \
  --max-tokens 128 --users 1 --threads 2 --parallel 4 --context-length 4096 \
  --chat-template-file chatml-think-open.jinja \
  --llama-server "${LLAMA_SERVER:-/tmp/llama-build/bin/llama-server}" --out "$out" > "$out.log" 2>&1
rm -rf "$work"
