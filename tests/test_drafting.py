"""Which drafter's proposal a sequence verifies, model-free: every free drafter is asked and the
proposal that promises most tokens a second wins; a draft model is asked only where nothing
ranked above it proposed; a probe goes first; Il Suggeritore's form is continued by the context
lookup, and each is booked its own share of the run."""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass

from reame.detokenize import TextStream
from reame.engine.drafting import best_proposal
from reame.engine.request import GenerationRequest
from reame.engine.sequence import Sequence
from reame.sampling import Sampler, SamplingParams
from reame.speculation.context_lookup import ContextLookup
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation

# where a k-token step costs k^0.75 steps (runs of drafts that are right pay)
BATCH_COST = {n: 0.008 * n**0.75 for n in range(1, 50)}


@dataclass
class Fixed:
    """A drafter that always proposes the same tokens."""

    name: str
    tokens: list[int]
    runs_a_model: bool = False
    asked: int = 0

    def propose(self, history: Seq[int], k: int) -> list[int]:
        self.asked += 1
        return self.tokens[:k]

    def observe(self, proposed: int, accepted: int) -> None:
        pass


def controller(**acceptance: float) -> SpecController:
    c = SpecController(mode="auto", max_length=32)
    for n, seconds in BATCH_COST.items():
        c.record_step(n, seconds)
    for name, value in acceptance.items():
        c._stats(name.replace("_", "-")).acceptance = value
    return c


def sequence(*drafters: object, history: list[int] | None = None) -> Sequence:
    params = SamplingParams(temperature=0.0, max_tokens=200)
    prompt = history or [1, 2, 3]
    seq = Sequence(
        GenerationRequest(prompt, params), lambda _: None, Sampler(params, 1000), TextStream()
    )
    seq.tokens.extend(prompt)
    seq.drafters = {d.name: d for d in drafters}  # type: ignore[attr-defined]
    return seq


def test_the_proposal_that_gives_most_tokens_a_second_wins_not_the_first_asked() -> None:
    c = controller(context=0.97, palimpsest=0.95)
    short, long = Fixed("context", [5]), Fixed("palimpsest", list(range(10, 26)))
    assert c.order(["context", "palimpsest"])[0] == "context"
    proposal = best_proposal(c, sequence(short, long), 0, 4096)
    assert proposal is not None and proposal.source == "palimpsest"
    assert len(proposal.tokens) == c.draft_length("palimpsest", 0) > 1
    assert short.asked == long.asked == 1


def test_a_short_suggestion_that_is_right_beats_a_long_lookup_that_is_wrong() -> None:
    c = controller(context=0.3, suggeritore=0.95)
    lookup, form = Fixed("context", list(range(10, 26))), Fixed("suggeritore", [7, 8, 9])
    proposal = best_proposal(c, sequence(lookup, form), 0, 4096)
    assert proposal is not None and proposal.tokens == [7, 8, 9]
    assert proposal.source == "suggeritore"


def test_a_draft_model_is_asked_only_where_nothing_ranked_above_it_proposed() -> None:
    c = controller(context=0.95, draft_model=0.9)
    model = Fixed("draft-model", [4, 4], runs_a_model=True)
    assert best_proposal(c, sequence(Fixed("context", [5]), model), 0, 4096).tokens == [5]
    assert model.asked == 0
    assert best_proposal(c, sequence(Fixed("context", []), model), 0, 4096).tokens == [4, 4]
    assert model.asked == 1
    first = controller(context=0.5, draft_model=0.99)  # ranked first: asked, and taken
    lookup = Fixed("context", list(range(10, 30)))
    assert best_proposal(first, sequence(lookup, model), 0, 4096).tokens == [4, 4]
    assert lookup.asked == 0


def test_a_probe_of_a_drafter_that_is_off_is_verified_so_that_it_can_come_back() -> None:
    c = controller(context=0.0, suggeritore=0.99)
    seq = sequence(Fixed("context", [5, 6, 7]), Fixed("suggeritore", [7, 8, 9]))
    picked = [best_proposal(c, seq, 0, 4096).source for _ in range(300)]
    assert not c.is_enabled("context")
    assert 1 <= picked.count("context") <= 3  # each probe, and nothing else
    assert picked.count("suggeritore") == len(picked) - picked.count("context")


def test_the_suggeritores_form_is_continued_by_the_lookup_and_each_books_its_share() -> None:
    # the answer so far: "[ a b ] x y z [ a" ; Il Suggeritore suggests "b ]" and the lookup
    # knows what followed "a b ]" before
    history = [90, 91, 92, 93, 20, 21, 22, 90, 91]
    c = controller(context=0.95, suggeritore=0.95)
    seq = sequence(Fixed("suggeritore", [92, 93]), ContextLookup(), history=history)
    proposal = best_proposal(c, seq, 0, 4096)
    assert proposal is not None
    assert c.draft_length("context", 0) == 6  # the run's length: 2 of form, 4 looked up
    assert proposal.tokens == [92, 93, 20, 21, 22, 90]
    assert proposal.parts == (("suggeritore", 2), ("context", 4))
    assert proposal.source == "suggeritore+context"

    spec = Speculation(c)
    spec.booked(proposal.parts, verified=6, accepted=3)  # its form kept, one word more
    assert (c.drafters["suggeritore"].runs, c.drafters["suggeritore"].proposed) == (1, 2)
    assert c.drafters["suggeritore"].accepted == 2
    assert (c.drafters["context"].proposed, c.drafters["context"].accepted) == (4, 1)
    spec.booked(proposal.parts, verified=6, accepted=1)  # its form refused: no lookup run
    assert c.drafters["suggeritore"].accepted == 3 and c.drafters["context"].runs == 1


def test_the_context_lookup_never_indexes_drafts_it_was_asked_to_continue() -> None:
    lookup = ContextLookup()
    history = [1, 2, 3, 4, 1, 2]
    assert lookup.continue_after(history, [7, 7], 4) == []
    assert lookup.propose(history, 4) == [3, 4, 1, 2]
    assert lookup.propose([*history, 7, 7, 9], 4) == []  # the drafts [7, 7] were not kept


def test_no_draft_reaches_the_position_where_runs_stop_rounding_as_single_steps() -> None:
    """Past the position the engine's probe found (engine/exact_run.py), a verify run would round
    otherwise than one-token steps: the run's last position stays before it, and a sequence
    already there gets no drafts. Without the cap, the whole 16-token proposal is made."""
    c = controller(palimpsest=0.95)
    c.exact_until = 10
    long = Fixed("palimpsest", list(range(10, 26)))
    near = best_proposal(c, sequence(long, history=list(range(1, 7))), 0, 4096)
    # the last token held (position 5) and 4 drafts (6..9) make the verify run
    assert near is not None and len(near.tokens) == 4
    assert best_proposal(c, sequence(long, history=list(range(1, 11))), 0, 4096) is None
    c.exact_until = None
    free = best_proposal(c, sequence(long, history=list(range(1, 11))), 0, 4096)
    assert free is not None and len(free.tokens) == c.draft_length("palimpsest", 0) > 4
