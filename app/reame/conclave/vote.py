"""Counting the Conclave's votes: pure.

A finished candidate votes for its extracted answer, or abstains when it has none. An answer
held by more than half of all N candidates wins at once (the ones still running can no longer
change it). When every candidate is in without such a majority, the most votes win; a tie goes
to the answer of the lowest-numbered candidate among those tied (candidate 0 is the request's
own sampling, candidate k has seed + k, so the choice is reproducible). With no answer at all,
candidate 0's text is the response.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Tally:
    size: int  # N
    votes: dict[str, list[int]] = field(default_factory=dict)  # answer -> candidates, in order
    abstained: list[int] = field(default_factory=list)  # finished with no answer
    stopped: list[int] = field(default_factory=list)  # stopped before finishing

    def add(self, candidate: int, answer: str | None) -> None:
        if answer is None:
            self.abstained.append(candidate)
        else:
            self.votes.setdefault(answer, []).append(candidate)

    @property
    def num_in(self) -> int:
        return len(self.abstained) + sum(len(v) for v in self.votes.values())

    def majority(self) -> str | None:
        """The answer held by more than half of N, if one is."""
        for answer, voters in self.votes.items():
            if 2 * len(voters) > self.size:
                return answer
        return None

    def winner(self) -> tuple[str | None, int]:
        """The winning answer and the candidate whose text answers the call (the lowest-numbered
        voter for it); (None, lowest finished candidate) when nobody answered."""
        if not self.votes:
            return None, min(self.abstained, default=0)
        most = max(len(v) for v in self.votes.values())
        tied = [(min(v), a) for a, v in self.votes.items() if len(v) == most]
        candidate, answer = min(tied)
        return answer, candidate

    def agreement(self) -> str:
        """How many candidates voted for the winning answer, of how many: "2/3" (0 when nobody
        answered)."""
        answer, _ = self.winner()
        return f"{len(self.votes.get(answer, [])) if answer is not None else 0}/{self.size}"

    def summary(self) -> dict[str, object]:
        """The `conclave` field of a response."""
        answer, candidate = self.winner()
        return {
            "n": self.size,
            "answer": answer,
            "candidate": candidate,
            "tally": {a: len(v) for a, v in sorted(self.votes.items(), key=lambda kv: -len(kv[1]))},
            "majority": self.majority() is not None,
            "abstained": len(self.abstained),
            "stopped_early": len(self.stopped),
        }
