"""Per-request acceptance, model-free: each request decides on its own verify runs, the
drafter-wide figure being its prior, so a repeated subject drafts long at once and a novel one
stops at once, whatever the other requests do; and each request counts its own drafts kept and
refused, for its usage (on the fake engine)."""

from __future__ import annotations

import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fake_llama import FakeContext, FakeModel, reference
from reame.detokenize import TextStream
from reame.engine.drafting import best_proposal
from reame.engine.engine import Engine
from reame.engine.request import Event, FinishEvent, GenerationRequest, TokenEvent
from reame.engine.sequence import Sequence
from reame.llama.context import ContextShape
from reame.sampling import Sampler, SamplingParams
from reame.speculation.controller import RequestStats, SpecController
from reame.speculation.kit import Speculation
from reame.speculation.palimpsest import Palimpsest

# a small model on 2 cores: a k-token step costs k^0.75 steps (runs that are right pay)
CHEAP_BATCHES = {n: 0.008 * n**0.75 for n in range(1, 50)}


def controller() -> SpecController:
    c = SpecController(mode="auto", max_length=32)
    for n, seconds in CHEAP_BATCHES.items():
        c.record_step(n, seconds)
    return c


def taught(acceptance_runs: tuple[int, int], times: int = 40) -> SpecController:
    """A controller whose drafter-wide figure for "palimpsest" other requests' runs set."""
    c = controller()
    for _ in range(times):
        c.record_drafts("palimpsest", *acceptance_runs)
    return c


def test_a_request_whose_drafts_are_kept_drafts_long_though_the_drafter_is_off() -> None:
    c = taught((4, 0))  # the other requests' drafts were all refused
    assert c.draft_length("palimpsest", 0) == 0 and not c.is_enabled("palimpsest")
    own: dict[str, RequestStats] = {}
    lengths, wide = [], []
    for _ in range(4 * 128):
        k = c.draft_length("palimpsest", 0, own=own)
        if k:
            lengths.append(k)
            wide.append(c.is_enabled("palimpsest"))  # what a new request would get
            c.record_drafts("palimpsest", k, k, own)  # this one's: all kept
            for _ in range(2):
                c.record_drafts("palimpsest", 4, 0, {})  # others': refused
        if k >= 16:
            break
    assert lengths and lengths[-1] >= 16, lengths
    assert len(lengths) <= 12, lengths  # a few probes, then longer runs at once
    assert not any(wide)  # off for everyone else all along


def test_a_request_whose_drafts_are_refused_backs_off_though_the_drafter_pays() -> None:
    c = taught((8, 8))  # the other requests' drafts were all kept
    assert c.draft_length("palimpsest", 0) == 32
    own: dict[str, RequestStats] = {}
    lengths = []
    for _ in range(6):
        k = c.draft_length("palimpsest", 0, own=own)
        lengths.append(k)
        if k:
            c.record_drafts("palimpsest", k, 0, own)  # this one's: refused at once
        c.record_drafts("palimpsest", 8, 8, {})  # another request's: kept
    assert lengths[0] == 32 and lengths[2:] == [0] * 4, lengths  # off after two runs
    assert c.drafters["palimpsest"].acceptance > 0.9
    assert c.draft_length("palimpsest", 0) == 32 and c.is_enabled("palimpsest")
    assert c.draft_length("palimpsest", 0, own={}) == 32  # a new request: the drafter's


def test_a_new_request_starts_from_the_drafter_wide_figure() -> None:
    c = taught((8, 5))
    wide = c.drafters["palimpsest"].acceptance
    assert c.acceptance("palimpsest", {}) == wide
    assert c.acceptance("palimpsest", {"context": RequestStats(3.0, 0.0)}) == wide
    assert c.draft_length("palimpsest", 0, own={}) == c.draft_length("palimpsest", 0)
    parts = (("palimpsest", 4),)
    assert c.rate(parts, 0, {}) == c.rate(parts, 0)
    # its own runs move its figure, not the next request's
    own: dict[str, RequestStats] = {}
    c.record_drafts("palimpsest", 8, 8, own)
    assert c.acceptance("palimpsest", own) > c.drafters["palimpsest"].acceptance
    assert c.acceptance("palimpsest", {}) == c.drafters["palimpsest"].acceptance


def test_the_drafter_wide_figure_is_moved_by_every_requests_runs_as_before() -> None:
    with_own, without = controller(), controller()
    for accepted in (3, 0, 8, 8, 1):
        with_own.record_drafts("context", 8, accepted, {})
        without.record_drafts("context", 8, accepted)
    assert with_own.drafters["context"] == without.drafters["context"]


def test_the_drafters_are_asked_in_the_order_of_the_requests_own_figures() -> None:
    c = controller()
    for _ in range(10):
        c.record_drafts("palimpsest", 4, 4)
        c.record_drafts("context", 4, 0)
    assert c.order(["context", "palimpsest"]) == ["palimpsest", "context"]
    own: dict[str, RequestStats] = {}
    for _ in range(3):
        c.record_drafts("palimpsest", 4, 0, own)
        c.record_drafts("context", 8, 8, own)
    assert c.order(["context", "palimpsest"], own) == ["context", "palimpsest"]


runs = st.lists(
    st.tuples(st.integers(1, 48), st.integers(0, 48)).map(lambda r: (r[0], min(r[0], r[1]))),
    max_size=60,
)


@given(st.floats(0.0, 1.0), runs)
def test_a_requests_estimate_stays_a_chance_and_moves_with_its_drafts(
    prior: float, request_runs: list[tuple[int, int]]
) -> None:
    mine = RequestStats()
    for proposed, accepted in request_runs:
        for kept in [True] * accepted + [False] * (accepted < proposed):
            before = mine.estimate(prior)
            mine.record(1, int(kept))
            after = mine.estimate(prior)
            assert 0.0 <= after <= 1.0
            # a kept draft never lowers it, a refused one never raises it
            assert after >= before - 1e-12 if kept else after <= before + 1e-12


@given(runs, runs)
def test_the_controllers_figures_stay_chances_whatever_the_runs(
    wide_runs: list[tuple[int, int]], own_runs: list[tuple[int, int]]
) -> None:
    c = controller()
    own: dict[str, RequestStats] = {}
    for proposed, accepted in wide_runs:
        c.record_drafts("context", proposed, accepted)
    for proposed, accepted in own_runs:
        c.record_drafts("context", proposed, accepted, own)
        assert 0.0 <= c.drafters["context"].acceptance <= 1.0
        assert 0.0 <= c.acceptance("context", own) <= 1.0
        assert 0 <= c.draft_length("context", 0, own=own) <= c.max_length


# -- the sequence's own figures, through the drafting and the booking of runs ----------------


class Fixed:
    """A drafter that always proposes the same tokens."""

    name = "palimpsest"
    runs_a_model = False

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens

    def propose(self, history: object, k: int) -> list[int]:
        return self.tokens[:k]

    def observe(self, proposed: int, accepted: int) -> None:
        pass


def sequence(drafter: Fixed) -> Sequence:
    params = SamplingParams(temperature=0.0, max_tokens=200)
    seq = Sequence(
        GenerationRequest([1, 2, 3], params), lambda _: None, Sampler(params, 1000), TextStream()
    )
    seq.tokens.extend([1, 2, 3])
    seq.drafters = {drafter.name: drafter}
    return seq


def test_each_sequence_is_drafted_by_its_own_runs() -> None:
    c = taught((4, 1))  # about 1 in 4 kept: off for everyone
    spec = Speculation(c)
    drafter = Fixed(list(range(10, 60)))
    repeated, fresh = sequence(drafter), sequence(drafter)
    lengths = []
    for _ in range(4 * 128):
        proposal = best_proposal(c, repeated, 1, 4096)
        if proposal is not None:  # a probe first: then the repeated one's runs are all kept
            k = len(proposal.tokens)
            lengths.append(k)
            if k >= 16:
                break
            spec.booked(proposal.parts, k, k, repeated.draft_stats)
            for _ in range(2):  # the fresh one's refused
                spec.booked((("palimpsest", 4),), 4, 0, fresh.draft_stats)
    assert lengths and lengths[-1] >= 16 and len(lengths) <= 12, lengths
    assert repeated.draft_stats["palimpsest"].kept > fresh.draft_stats["palimpsest"].kept
    # NOTE: lengths computed, not asked: asking at k = 0 counts towards the next probe
    assert c.best_length(c.acceptance("palimpsest", fresh.draft_stats), 1) == 0
    wide = c.drafters["palimpsest"].acceptance  # a new one's: the drafter's, shorter
    assert c.acceptance("palimpsest", {}) == wide and c.best_length(wide, 1) < lengths[-1]


# -- each request's drafts kept and refused, on its finish event (the fake engine) -----------


def run_to_end(engine: Engine, prompt: list[int], params: SamplingParams) -> list[Event]:
    events: list[Event] = []
    done = threading.Event()

    def sink(event: Event) -> None:
        events.append(event)
        if isinstance(event, FinishEvent):
            done.set()

    engine.submit(GenerationRequest(prompt, params), sink)
    assert done.wait(10), "the request never finished"
    return events


def test_a_finish_event_counts_the_requests_drafts_kept_and_refused(tmp_path: Path) -> None:
    spec = Speculation(SpecController("on", 8), Palimpsest(tmp_path, "fake", 1 << 20))
    context = FakeContext(ContextShape(2 * 256, 32, 2, 1))
    engine = Engine(FakeModel(), context, 256, speculation=spec)  # type: ignore[arg-type]
    engine.start()
    prompt = [7, 8, 9, 10, 7, 8, 9, 10, 7, 8, 9, 10, 7, 8]
    expected = reference(prompt, 30)
    stop = f"<{expected[14]}>"  # in the middle of a run of drafts the archive knows
    try:
        for params, kept_all in [
            (SamplingParams(temperature=0.0, max_tokens=30), False),  # teaches the archive
            (SamplingParams(temperature=0.0, max_tokens=30), True),
            (SamplingParams(temperature=0.0, max_tokens=30, stop=[stop]), False),
        ]:
            before = {n: (s.proposed, s.accepted) for n, s in spec.controller.drafters.items()}
            events = run_to_end(engine, prompt, params)
            finish = events[-1]
            assert isinstance(finish, FinishEvent)
            tokens = [e.token for e in events if isinstance(e, TokenEvent)]
            assert tokens == expected[: len(tokens)]
            proposed = sum(
                s.proposed - before.get(n, (0, 0))[0] for n, s in spec.controller.drafters.items()
            )
            accepted = sum(
                s.accepted - before.get(n, (0, 0))[1] for n, s in spec.controller.drafters.items()
            )
            assert finish.num_accepted_drafts + finish.num_rejected_drafts == proposed > 0
            assert finish.num_accepted_drafts <= min(accepted, finish.num_completion_tokens)
            if kept_all:
                assert finish.num_accepted_drafts == accepted == proposed
        # the stopped one: the drafts kept after its end are not in its answer
        assert finish.num_completion_tokens == 15
        assert finish.num_accepted_drafts < accepted
    finally:
        assert engine.close()
