#!/bin/bash
# Paired before (f10037d, /tmp/before) and after (HEAD, installed) benches, one mode at a time.
OUT=/tmp/pair; mkdir -p $OUT; cd /tmp
SERVE="--host 127.0.0.1 --threads 2 --parallel 4 --context-length 4096"
wait_up() { for i in $(seq 1 180); do curl -sf http://127.0.0.1:$1/health >/dev/null && return 0; sleep 1; done; echo "port $1 not up"; return 1; }
start() { # name port [env...]
  local name=$1 port=$2; shift 2
  rm -rf /tmp/st-$name
  if [ $name = before ]; then
    env PYTHONPATH=/tmp/before/app:/tmp/before/bench REAME_STATE_DIR=/tmp/st-$name "$@" python3 -m reame.cli.main serve $SERVE --port $port > $OUT/$name-$port.log 2>&1 &
  else
    env REAME_STATE_DIR=/tmp/st-$name "$@" python3 -m reame.cli.main serve $SERVE --port $port > $OUT/$name-$port.log 2>&1 &
  fi
  echo $! > $OUT/$name.pid; wait_up $port
}
stop() { for n in before after; do [ -f $OUT/$n.pid ] && kill $(cat $OUT/$n.pid) 2>/dev/null; done; sleep 3; }
URLS="--url http://127.0.0.1:8101 --name before --url http://127.0.0.1:8102 --name after"
echo "decode $(date)"; start before 8101; start after 8102
reame bench $URLS --runs 3 > $OUT/decode.txt 2>&1; stop
echo "prefix $(date)"
PYTHONPATH=/tmp/before/app:/tmp/before/bench python3 -m reame.cli.main bench --prefix --threads 2 --parallel 4 --context-length 4096 --runs 3 > $OUT/prefix-before.txt 2>&1
reame bench --prefix --threads 2 --parallel 4 --context-length 4096 --runs 3 > $OUT/prefix-after.txt 2>&1
echo "spec $(date)"; start before 8101; start after 8102
reame bench --spec $URLS --runs 3 > $OUT/spec.txt 2>&1; stop
for t in chat rag; do
  echo "replay $t $(date)"; start before 8101
  reame bench --replay --traces $t --requests 30 --users 1 --threads 2 --parallel 4 --context-length 4096 --url http://127.0.0.1:8101 --name before --out $OUT/$t > $OUT/$t.log 2>&1; stop
done
echo "replay thinking $(date)"; cd /tmp/bench
start before 8101 REAME_REASONING_BUDGET=4 REAME_CHAT_TEMPLATE_FILE=/tmp/bench/chatml-think-open.jinja
REAME_REASONING_BUDGET=4 reame bench --replay --traces thinking --requests 20 --max-tokens 128 --users 1 --threads 2 --parallel 4 --context-length 4096 --chat-template-file chatml-think-open.jinja --url http://127.0.0.1:8101 --name before --out $OUT/thinking > $OUT/thinking.log 2>&1; stop
echo "done $(date)"
