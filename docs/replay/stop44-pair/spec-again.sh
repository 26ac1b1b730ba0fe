#!/bin/bash
# The speculation pair again, on a quiet machine (the first run shared it with other work).
OUT=${OUT:-/tmp/pair44}; mkdir -p $OUT; cd /tmp
B="env PYTHONPATH=/tmp/before/app:/tmp/before/bench python3 -m reame.cli.main"
A="env PYTHONPATH=/tmp/wA/app:/tmp/wA/bench python3 -m reame.cli.main"
SERVE="--host 127.0.0.1 --threads 2 --parallel 4 --context-length 4096"
wait_up() { for i in $(seq 1 180); do curl -sf http://127.0.0.1:$1/health >/dev/null && return 0; sleep 1; done; return 1; }
rm -rf /tmp/st-before /tmp/st-after
REAME_STATE_DIR=/tmp/st-before $B serve $SERVE --port 8101 > $OUT/before-spec.log 2>&1 & PB=$!
REAME_STATE_DIR=/tmp/st-after $A serve $SERVE --port 8102 > $OUT/after-spec.log 2>&1 & PA=$!
wait_up 8101; wait_up 8102
$A bench --spec --url http://127.0.0.1:8101 --name before --url http://127.0.0.1:8102 --name after --runs 3 > $OUT/spec-again.txt 2>&1
kill $PB $PA; sleep 3; echo "done $(date)"
