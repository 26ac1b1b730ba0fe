"""What a fuzzing test saw: examples, statuses, one example of each distinct failure."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Tally:
    name: str  # which fuzzer, for the report's first line
    examples: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    failures: dict[tuple[str, str], str] = field(default_factory=dict)  # (where, what): one

    def report(self) -> str:
        lines = [
            f"{self.name}: {self.examples} examples run, {len(self.failures)} distinct failures",
            "statuses: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.statuses.items())),
        ]
        lines += [f"--- {where}: {what}\n{text}" for (where, what), text in self.failures.items()]
        return "\n".join(lines)
