"""The cluster bench's stage requests (bench/reame_bench/cluster_stages.py) against one server:
two stage chats, four other chats, a stage chat again, greedy, 2 tokens each. Usage:
python3 stages_drive.py URL TREE (TREE: whose bench package has the chats)."""

import json
import sys
import urllib.request

sys.path.insert(0, sys.argv[2] + "/bench")
from reame_bench.cluster_stages import other_chat, stage_chat  # noqa: E402

url = sys.argv[1]
with urllib.request.urlopen(url + "/v1/models") as response:
    model = json.load(response)["data"][0]["id"]


def ask(messages: list[dict]) -> tuple[str, dict]:
    body = {"model": model, "messages": messages, "max_tokens": 2, "temperature": 0}
    headers = {"content-type": "application/json"}
    request = urllib.request.Request(
        url + "/v1/chat/completions", json.dumps(body).encode(), headers
    )
    with urllib.request.urlopen(request) as response:
        answer = json.load(response)
    return answer["choices"][0]["message"]["content"], answer["usage"]


for q in (2, 3):
    print("stage", q, ask(stage_chat(0, q)), flush=True)
for k in range(4):
    print("other", k, ask(other_chat(0, k)), flush=True)
print("stage", 4, ask(stage_chat(0, 4)), flush=True)
