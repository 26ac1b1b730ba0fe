"""Seeded benchmark prompts: the same text for the same seed, on any machine."""

from __future__ import annotations

import random

_WORDS = (
    "the",
    "river",
    "mountain",
    "city",
    "engine",
    "garden",
    "winter",
    "letter",
    "market",
    "signal",
    "forest",
    "quiet",
    "harbor",
    "window",
    "morning",
    "orange",
    "circuit",
    "lantern",
    "bridge",
    "copper",
    "valley",
    "story",
    "thunder",
    "meadow",
    "silver",
    "compass",
    "journey",
    "pattern",
    "library",
    "candle",
    "island",
    "shadow",
    "machine",
    "canvas",
    "whisper",
    "orbit",
    "kitchen",
    "ladder",
    "marble",
    "needle",
    "ocean",
    "pocket",
    "rocket",
    "saddle",
    "timber",
    "velvet",
    "wagon",
    "yellow",
)

_TOPICS = (
    "Write a long story about a lighthouse keeper.",
    "Explain how a steam engine works, step by step.",
    "Describe a walk through a busy market at dawn.",
    "Write a letter from a sailor to his family.",
    "Explain why the sky changes colour at sunset.",
    "Describe the life of a honey bee through one summer.",
    "Write a story about two friends building a boat.",
    "Explain how bread is made, from wheat to loaf.",
)


def filler_text(seed: int, num_words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(num_words))


def topics(count: int, seed: int = 0) -> list[str]:
    """`count` distinct generation prompts (cycled with a seeded suffix past the fixed list)."""
    out = []
    for i in range(count):
        base = _TOPICS[(i + seed) % len(_TOPICS)]
        out.append(base if i < len(_TOPICS) else f"{base} ({filler_text(seed + i, 3)})")
    return out
