#!/bin/bash
# Stop 46: the answer memory and the exam, on Reame (a worktree of the commit measured, /tmp/wM)
# and llama-server (the llama.cpp of the llama-cpp-python 0.3.36 sdist, /tmp/llama-build), the
# same GGUF, 2 threads, 4 sequences, one server pair at a time on a 2-core machine.
#  1. `reame bench --again 6`: each of 6 extraction requests first, then 3 times again, whole
#     and streamed (SmolLM2).
#  2. hit_rate.py: the replay traces (30 requests each) sent twice to one Reame, by 1 user, then
#     by 3 users at once to a fresh one, and to a fresh one with kv_type q8_0.
#  3. the example exam with a Conclave of 5, on SmolLM2 and on Gemma 3 270M (a base model with
#     no chat template: each question as a raw prompt, --exam-completions).
set -u
OUT=${OUT:-/tmp/stop46-memory}; mkdir -p $OUT; cd /tmp
HERE=$(dirname "$(readlink -f "$0")")
R="env PYTHONPATH=/tmp/wM/app:/tmp/wM/bench python3 -m reame.cli.main"
LS=/tmp/llama-build/bin/llama-server
gguf() { python3 -c "
from reame.models.resolve import resolve_model; import pathlib, tempfile
print(resolve_model('$1', pathlib.Path(tempfile.mkdtemp()), allow_download=False))"; }
up() { for i in $(seq 1 180); do curl -sf http://127.0.0.1:$1/health >/dev/null && return; sleep 1; done; }
reame() {  # MODEL PORT STATE [ENV=VALUE ...]
  rm -rf $3; env REAME_STATE_DIR=$3 "${@:4}" $R serve $1 --host 127.0.0.1 --port $2 --threads 2 \
    --parallel 4 --context-length 4096 > $OUT/reame-$2-$(basename $3).log 2>&1 & echo $!; }
stop() { kill "$@"; for p in "$@"; do while kill -0 $p 2>/dev/null; do sleep 0.5; done; done; }
llama() { $LS -m $1 -t 2 -c 16384 -np 4 --host 127.0.0.1 --port $2 > $OUT/llama-$2.log 2>&1 & echo $!; }

S=$(gguf smollm2-135m); G=$(gguf gemma3-270m)
U="--url http://127.0.0.1:8103 --name reame --url http://127.0.0.1:8104 --name llama-server"

P1=$(reame smollm2-135m 8103 /tmp/st-m1); P2=$(llama $S 8104); up 8103; up 8104
$R bench --again 6 --again-runs 3 $U > $OUT/again.txt 2>&1
$R bench --exam example $U --best-of 5 --answers $OUT/exam-smollm2.json > $OUT/exam-smollm2.txt 2>&1
stop $P1 $P2

P1=$(reame smollm2-135m 8103 /tmp/st-m2); up 8103
PYTHONPATH=/tmp/wM/bench python3 $HERE/hit_rate.py http://127.0.0.1:8103 1 chat,agent,extract,rag 30 > $OUT/hits-1.txt 2>&1
stop $P1
P1=$(reame smollm2-135m 8103 /tmp/st-m3); up 8103
PYTHONPATH=/tmp/wM/bench python3 $HERE/hit_rate.py http://127.0.0.1:8103 3 chat,agent,extract,rag 30 > $OUT/hits-3.txt 2>&1
curl -s http://127.0.0.1:8103/metrics | grep answer_memory_writes > $OUT/hits-3-writes.txt
stop $P1
P1=$(reame smollm2-135m 8103 /tmp/st-m5 REAME_KV_TYPE=q8_0); up 8103
PYTHONPATH=/tmp/wM/bench python3 $HERE/hit_rate.py http://127.0.0.1:8103 3 chat,agent,extract,rag 30 > $OUT/hits-3-q8.txt 2>&1
curl -s http://127.0.0.1:8103/metrics | grep answer_memory_writes > $OUT/hits-3-q8-writes.txt
stop $P1

P1=$(reame gemma3-270m 8103 /tmp/st-m4); P2=$(llama $G 8104); up 8103; up 8104
$R bench --exam example --exam-completions $U --best-of 5 --answers $OUT/exam-gemma.json > $OUT/exam-gemma.txt 2>&1
stop $P1 $P2
grep -h "exact paths" $OUT/reame-8103-*.log > $OUT/exact-paths.txt
echo "done $(date)"
