#!/bin/bash
OUT=/tmp/pair4; mkdir -p $OUT; cd /tmp/bench
SERVE="--host 127.0.0.1 --threads 2 --parallel 4 --context-length 4096"
RB="--users 1 --threads 2 --parallel 4 --context-length 4096"
wait_up() { for i in $(seq 1 180); do curl -sf http://127.0.0.1:$1/health >/dev/null && return 0; sleep 1; done; return 1; }
start() { local name=$1 port=$2; shift 2; rm -rf /tmp/st-$name
  if [ $name = before ]; then PP=/tmp/before/app:/tmp/before/bench; else PP=; fi
  env PYTHONPATH=$PP REAME_STATE_DIR=/tmp/st-$name "$@" python3 -m reame.cli.main serve $SERVE --port $port > $OUT/$name-$port.log 2>&1 &
  echo $! > $OUT/$name.pid; wait_up $port; }
stop() { for n in before after; do [ -f $OUT/$n.pid ] && kill $(cat $OUT/$n.pid) 2>/dev/null; done; sleep 3; }
echo "chat: after (spec as shipped) against after $(date)"; start after 8101
reame bench --replay --traces chat --requests 30 $RB --url http://127.0.0.1:8101 --name after2 --out $OUT/chat-after-after > $OUT/chat-after-after.log 2>&1; stop
for t in chat rag; do
  echo "$t: after (spec as shipped) against before with spec off $(date)"; start before 8101 REAME_SPEC=off
  reame bench --replay --traces $t --requests 30 $RB --url http://127.0.0.1:8101 --name before-specoff --out $OUT/$t > $OUT/$t.log 2>&1; stop
done
echo "thinking $(date)"
start before 8101 REAME_SPEC=off REAME_REASONING_BUDGET=4 REAME_CHAT_TEMPLATE_FILE=/tmp/bench/chatml-think-open.jinja
REAME_REASONING_BUDGET=4 reame bench --replay --traces thinking --requests 20 --max-tokens 128 $RB --chat-template-file chatml-think-open.jinja --url http://127.0.0.1:8101 --name before-specoff --out $OUT/thinking > $OUT/thinking.log 2>&1; stop
echo "done $(date)"
