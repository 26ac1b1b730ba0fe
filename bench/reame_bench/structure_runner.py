"""`reame bench --structure`: what Il Suggeritore gives on structure that no earlier text holds.

Fresh numbered and bulleted lists, markdown tables and JSON arrays, on prompts that appear
nowhere else in the bench, and a row of prose without structure, each answered greedily in
three modes, in turns that rotate from run to run: speculation auto with Il Suggeritore on,
speculation auto with it off (everything else the same: the context lookup drafts in both, the
Palimpsest is off so that no earlier answer can help), and no speculation. Ratios are medians
of the pairs of one run and prompt; the whole structured workload is also timed as one (its
tokens over its decode seconds, a run at a time). A check says whether the greedy tokens were
the same in every mode.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

ON, OFF, PLAIN = "suggeritore on", "suggeritore off", "no speculation"
MODES = (ON, OFF, PLAIN)
RATIOS = ((ON, OFF), (ON, PLAIN), (OFF, PLAIN))
ANSWER_TOKENS = 200
PROSE = "prose without structure"
ALL_STRUCTURED = "all structured rows, as one"

WORKLOAD: dict[str, tuple[str, ...]] = {
    "numbered list": (
        "Write a numbered list of 12 names for a pet hamster.",
        "Write 8 short tips for studying, as a numbered list.",
    ),
    "bulleted list": (
        "Give a bulleted list of 8 colors.",
        "Write a bulleted list of 6 vegetables using - as the bullet.",
    ),
    "markdown table": (
        "Write a markdown table listing 5 countries and their capitals.",
        "Create a markdown table with columns Name, Age and City for 5 people.",
    ),
    "JSON array": (
        "Write a JSON array of 5 fruits. Each item is an object with keys name, color and price.",
        "Write a JSON array of 4 students. Each element is an object with keys name, grade and "
        "age.",
    ),
    PROSE: (
        "Write a short paragraph about why people enjoy watching the rain.",
        "Describe the smell of a bakery early in the morning.",
    ),
}


@dataclass(slots=True, frozen=True)
class Answer:
    tokens: list[int]
    decode_seconds: float  # from the first token to the last

    @property
    def decode_tps(self) -> float:
        return (len(self.tokens) - 1) / self.decode_seconds if self.decode_seconds > 0 else 0.0


@dataclass(slots=True, frozen=True)
class DraftFigures:
    """A drafter's verify runs, drafts verified and drafts kept."""

    runs: int = 0
    drafted: int = 0
    accepted: int = 0

    def __sub__(self, other: DraftFigures) -> DraftFigures:
        return DraftFigures(
            self.runs - other.runs, self.drafted - other.drafted, self.accepted - other.accepted
        )

    def __add__(self, other: DraftFigures) -> DraftFigures:
        return DraftFigures(
            self.runs + other.runs, self.drafted + other.drafted, self.accepted + other.accepted
        )

    @property
    def per_run(self) -> float:
        return self.accepted / self.runs if self.runs else 0.0


Ask = Callable[[str, str], Answer]  # (mode, prompt) -> the greedy answer, timed
Drafted = Callable[[str], dict[str, DraftFigures]]  # mode -> its engine's draft figures so far


@dataclass(slots=True)
class StructureReport:
    runs: int
    tps: dict[str, dict[str, float]] = field(default_factory=dict)  # row -> mode -> median
    ratios: dict[str, dict[str, float]] = field(default_factory=dict)  # row -> "a/b" -> median
    tokens: dict[str, float] = field(default_factory=dict)  # row -> median answer length
    # row -> mode -> tokens a decode step gave (what a verify that cost a step would give)
    tokens_per_step: dict[str, dict[str, float]] = field(default_factory=dict)
    drafted: dict[str, dict[str, DraftFigures]] = field(default_factory=dict)  # row -> drafter
    is_identical: bool = True
    step_costs: dict[int, float] = field(default_factory=dict)  # batch tokens -> x a 1-token step
    setup: str = ""  # the engines' model and sizes


def ratio_name(a: str, b: str) -> str:
    return f"{a} / {b}"


@dataclass(slots=True)
class _Row:
    rates: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    lengths: list[int] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODES, 0))
    accepted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODES, 0))
    drafted: dict[str, DraftFigures] = field(default_factory=dict)  # Suggeritore-on engine's

    def tokens_per_step(self) -> dict[str, float]:
        """Each decode step gives one token of the model's and the drafts it kept."""
        return {
            m: self.tokens[m] / (self.tokens[m] - self.accepted[m]) if self.tokens[m] else 1.0
            for m in MODES
        }


def bench_structure(
    ask: Ask, drafted: Drafted, runs: int, log: Callable[[str], None]
) -> StructureReport:
    report = StructureReport(runs)
    rows = {row: _Row() for row in [*WORKLOAD, ALL_STRUCTURED]}
    whole = rows[ALL_STRUCTURED]
    whole_seconds = {m: [0.0] * runs for m in MODES}  # the structured rows' decode, per run
    whole_tokens = [0] * runs
    first_answer: dict[str, list[int]] = {}  # prompt -> the tokens of its first answer
    for run in range(runs):
        log(f"structure: run {run + 1} of {runs}")
        order = MODES[run % 3 :] + MODES[: run % 3]
        for name, prompts in WORKLOAD.items():
            row = rows[name]
            for prompt in prompts:
                for mode in order:
                    before = drafted(mode)
                    answer = ask(mode, prompt)
                    spent = _delta(drafted(mode), before)
                    kept = sum(f.accepted for f in spent.values())
                    targets = [row] if name == PROSE else [row, whole]
                    for r in targets:
                        r.tokens[mode] += len(answer.tokens) - 1
                        r.accepted[mode] += kept
                        if mode == ON:
                            _add(r.drafted, spent)
                    row.rates[mode].append(answer.decode_tps)
                    if mode == PLAIN:
                        row.lengths.append(len(answer.tokens))
                    if name != PROSE:
                        whole_seconds[mode][run] += answer.decode_seconds
                        if mode == PLAIN:
                            whole_tokens[run] += len(answer.tokens) - 1
                    expected = first_answer.setdefault(prompt, answer.tokens)
                    report.is_identical &= answer.tokens == expected
    for m in MODES:
        whole.rates[m] = [n / s for n, s in zip(whole_tokens, whole_seconds[m], strict=True)]
    whole.lengths = whole_tokens
    for name, row in rows.items():
        report.tps[name] = {m: statistics.median(v) for m, v in row.rates.items()}
        report.ratios[name] = _paired(row.rates)
        report.tokens[name] = statistics.median(row.lengths)
        report.tokens_per_step[name] = row.tokens_per_step()
        report.drafted[name] = row.drafted
    return report


def _paired(by_mode: dict[str, list[float]]) -> dict[str, float]:
    """Each ratio a median of pairs of one run and prompt: the machine's drift cancels out."""
    out = {}
    for a, b in RATIOS:
        pairs = [x / y for x, y in zip(by_mode[a], by_mode[b], strict=True) if y > 0]
        out[ratio_name(a, b)] = statistics.median(pairs) if pairs else 0.0
    return out


def _delta(
    after: dict[str, DraftFigures], before: dict[str, DraftFigures]
) -> dict[str, DraftFigures]:
    return {name: f - before.get(name, DraftFigures()) for name, f in after.items()}


def _add(total: dict[str, DraftFigures], more: dict[str, DraftFigures]) -> None:
    for name, f in more.items():
        total[name] = total.get(name, DraftFigures()) + f


def all_prompts() -> list[str]:
    return [p for prompts in WORKLOAD.values() for p in prompts]
