"""Server-sent events framed as OpenAI frames them."""

from __future__ import annotations

import json

DONE = "data: [DONE]\n\n"


def frame(payload: dict[str, object]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'), ensure_ascii=False)}\n\n"
