"""How many engine steps so far shared one llama_decode among more than n sequences, read from
the step-size histogram the server exports (tests take the difference around what they run)."""

from __future__ import annotations

from reame import metrics


def steps_with_more_than(n: int) -> float:
    name = "reame_engine_step_sequences"
    total = metrics.REGISTRY.get_sample_value(f"{name}_count") or 0.0
    within = metrics.REGISTRY.get_sample_value(f"{name}_bucket", {"le": str(float(n))}) or 0.0
    return total - within
