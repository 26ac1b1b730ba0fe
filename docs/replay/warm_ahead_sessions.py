"""A session's next-turn time to first token, the figure docs/benchmarks.md gives for warm-ahead
with and without it: 3 conversations kept as sessions (`session_id`) behind one system prompt
of 400 words, 6 turns each taken in turn, 32-token greedy answers, streamed by the openai client,
the client pausing PAUSE seconds after each answer. Prints the median time to first token of
turns 2-6 and of turn 1, in seconds.

    reame serve --parallel 4 --context-length 4096 --threads 2 &   # REAME_WARM_AHEAD=false: off
    python3 docs/replay/warm_ahead_sessions.py http://127.0.0.1:8000/v1 0.5
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time

from openai import OpenAI

from reame_bench.replay_text import policy, question

SESSIONS, TURNS = 3, 6


def main(url: str, pause: float) -> None:
    client = OpenAI(base_url=url, api_key="none")
    model = client.models.list().data[0].id
    rng = random.Random(f"sessions-{pause}-{time.time_ns()}")  # NOTE: new sessions each run
    system = {"role": "system", "content": policy(rng, "Northwind Supplies", 400)}
    histories = {f"s{rng.randrange(10**9)}": [system] for _ in range(SESSIONS)}
    firsts: dict[int, list[float]] = {turn: [] for turn in range(1, TURNS + 1)}
    for turn in range(1, TURNS + 1):
        for session, history in histories.items():
            history.append({"role": "user", "content": question(rng)})
            sent = time.perf_counter()
            first, text = None, ""
            stream = client.chat.completions.create(
                model=model, messages=history, max_tokens=32, temperature=0, stream=True,
                extra_body={"session_id": session},
            )  # fmt: skip
            for chunk in stream:
                piece = chunk.choices[0].delta.content if chunk.choices else None
                if piece and first is None:
                    first = time.perf_counter() - sent
                text += piece or ""
            firsts[turn].append(first if first is not None else time.perf_counter() - sent)
            history.append({"role": "assistant", "content": text})
            time.sleep(pause)
    later = [t for turn in range(2, TURNS + 1) for t in firsts[turn]]
    print(json.dumps({"pause": pause, "later_turns_ttft": round(statistics.median(later), 4),
                      "first_turn_ttft": round(statistics.median(firsts[1]), 4)}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
