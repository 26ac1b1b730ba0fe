#!/bin/bash
# Paired before (f10037d, /tmp/before) and after (a worktree of the commit measured, /tmp/wA)
# benches, one mode at a time; the in-process and self-starting modes run before, after,
# before, after. Both versions run with PYTHONPATH naming their worktree.
OUT=${OUT:-/tmp/pair44}; mkdir -p $OUT; cd /tmp
B="env PYTHONPATH=/tmp/before/app:/tmp/before/bench python3 -m reame.cli.main"
A="env PYTHONPATH=/tmp/wA/app:/tmp/wA/bench python3 -m reame.cli.main"
SERVE="--host 127.0.0.1 --threads 2 --parallel 4 --context-length 4096"
wait_up() { for i in $(seq 1 180); do curl -sf http://127.0.0.1:$1/health >/dev/null && return 0; sleep 1; done; echo "port $1 not up"; return 1; }
start() { # name port
  local name=$1 port=$2 run
  rm -rf /tmp/st-$name
  if [ $name = before ]; then run=$B; else run=$A; fi
  REAME_STATE_DIR=/tmp/st-$name $run serve $SERVE --port $port > $OUT/$name-$port.log 2>&1 &
  echo $! > $OUT/$name.pid; wait_up $port
}
stop() { for n in before after; do [ -f $OUT/$n.pid ] && kill $(cat $OUT/$n.pid) 2>/dev/null; done; sleep 3; }
URLS="--url http://127.0.0.1:8101 --name before --url http://127.0.0.1:8102 --name after"
echo "decode $(date)"; start before 8101; start after 8102
$A bench $URLS --runs 5 > $OUT/decode.txt 2>&1; stop
echo "spec $(date)"; start before 8101; start after 8102
$A bench --spec $URLS --runs 3 > $OUT/spec.txt 2>&1; stop
echo "structured $(date)"; start before 8101; start after 8102
$A bench --structured smollm2-135m $URLS --items 12 --seed 1 > $OUT/structured.txt 2>&1; stop
for i in 1 2; do
  echo "prefix $i $(date)"
  $B bench --prefix --threads 2 --parallel 4 --context-length 4096 --runs 3 > $OUT/prefix-before-$i.txt 2>&1
  $A bench --prefix --threads 2 --parallel 4 --context-length 4096 --runs 3 > $OUT/prefix-after-$i.txt 2>&1
done
for i in 1 2; do
  echo "hostile $i $(date)"
  $B bench --hostile > $OUT/hostile-before-$i.txt 2>&1
  $A bench --hostile > $OUT/hostile-after-$i.txt 2>&1
done
echo "done $(date)"
