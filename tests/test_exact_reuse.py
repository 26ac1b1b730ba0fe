"""Token-granular reuse of a free sequence's KV: the pure rule (every token on a cold request's
kernel path), and on the real SmolLM2 answers equal to a cold request's while it reuses more
than the chunk ends did, in the case that lost to llama-server (questions that share their
first words)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import small_settings
from reame.engine.exact_reuse import (
    TILED_QUERIES,
    WIDE_ENOUGH,
    chunks,
    computed_chunks,
    cuts_past,
    exact_reuse,
    path_of,
)
from reame.runtime import Runtime
from reame_bench.workloads import filler_text
from test_prefix_cache import answer, chat

BUDGET = 512


def test_kernel_paths_split_at_one_and_sixty_four_queries() -> None:
    assert [path_of(w) for w in (1, 2, 63, 64, 512)] == [0, 1, 1, 2, 2]


@given(
    st.integers(0, 3000),
    st.integers(1, 3000),
    st.lists(st.integers(0, 6000), max_size=6),
    st.integers(1, 600),
)
def test_chunks_cover_the_range_in_order_stop_at_cuts_and_keep_to_the_budget(
    start: int, length: int, cuts: list[int], budget: int
) -> None:
    end = start + length
    out = chunks(start, end, cuts, budget)
    assert out[0][0] == start and out[-1][1] == end
    assert all(a < b <= a + budget for a, b in out)
    assert all(b == c for (_, b), (c, _) in zip(out, out[1:], strict=False))
    ends = {b for _, b in out}
    assert all(c in ends for c in cuts if start < c < end)


def test_a_narrow_chunk_wide_enough_is_computed_as_the_tiled_sixty_four_before_its_end() -> None:
    # cuts at 300 and 348: 48 queries would run narrow; 20 stay narrow (cheaper so)
    assert computed_chunks(0, 368, (300, 348), BUDGET) == [(0, 300), (284, 348), (348, 368)]
    assert computed_chunks(0, 50, (), BUDGET) == [(0, 50)]  # nothing before it to widen into
    assert computed_chunks(0, 348, (300,), 48) == chunks(0, 348, (300,), 48)  # no room to widen


def test_a_rest_after_the_resident_prompt_is_widened_as_a_cold_request_widens_it() -> None:
    # the resident's prompt ended at 600; the rest, 50 tokens, is computed from 586, tiled, as
    # a cold request computes it; it was computed narrow where the cold went tiled before
    resident = ([0, 300, 600], [(0, 300), (300, 600)])
    assert computed_chunks(600, 650, (), BUDGET) == [(586, 650)]
    assert exact_reuse(600, *resident, (300,), (), 650, BUDGET) == 600
    # a rest too narrow to widen that would run narrow where the cold one is tiled: the last 64
    resident = ([0, 300, 700], [(0, 300), (300, 700)])
    assert exact_reuse(650, *resident, (300,), (), 650 + WIDE_ENOUGH - 1, BUDGET) == 625


def test_a_wide_tail_reused_into_stays_exact() -> None:
    # cold: chunks end at 300 (the system prompt) and 520; the resident's prompt ended at 500
    resident = ([0, 300, 500], [(0, 300), (300, 500)])
    assert exact_reuse(302, *resident, (300, 520), (520,), 520, BUDGET) == 302


def test_a_narrow_tail_is_not_reused_into() -> None:
    # below 64 queries a token's rounding depends on its chunk: measured, an answer changed
    resident = ([0, 300, 328], [(0, 300), (300, 328)])
    assert exact_reuse(302, *resident, (300, 330), (330,), 330, BUDGET) == 300


def test_a_narrow_rest_starts_earlier_to_stay_tiled_else_the_reuse_stops_at_the_chunk_end() -> None:
    # the rest, 20 tokens, would be computed narrow where a cold request computes 100 tiled:
    # the last 64 are computed again instead
    resident = ([0, 300, 400], [(0, 300), (300, 400)])
    assert exact_reuse(380, *resident, (300, 400), (400,), 400, BUDGET) == 400 - 64
    # the resident computed its tail narrow (300..340) where a cold request goes tiled (300..400)
    resident = ([0, 300, 340], [(0, 300), (300, 340)])
    assert exact_reuse(320, *resident, (300, 400), (400,), 400, BUDGET) == 300
    # a lone last token is a path of its own
    assert exact_reuse(329, *resident, (300, 330), (330,), 330, BUDGET) == 300


def test_a_cut_less_than_a_tiled_chunk_past_the_reuse_is_not_taken() -> None:
    # rag: three of four passages shared (490 tokens) with a prompt cut at 39 and 512; computed
    # from 490 with its own cut at 512 kept, the chunk up to it would be 22 tokens wide, and
    # from 448 the 42 shared tokens are computed again: the cut is dropped, all 490 reused
    resident = ([0, 39, 512, 647], [(0, 39), (39, 512), (512, 647)])
    assert exact_reuse(490, *resident, (39, 512), (512,), 684, BUDGET) == 490
    assert cuts_past((512, 600, 684), 490, 684) == [600, 684]
    assert cuts_past((512, 684), 448, 684) == [512, 684]
    assert cuts_past((512,), 500, 530) == []  # the whole prompt is kept as a cut only
    assert cuts_past((530,), 500, 530) == [530]


def test_where_chunks_overlap_the_later_one_computed_the_tokens() -> None:
    # it went on from 302 inside a wide chunk and computed 302..320 narrow: those are not tiled
    resident = ([0, 300, 302, 320], [(0, 300), (300, 500), (302, 320)])
    assert exact_reuse(315, *resident, (300,), (), 600, BUDGET) == 302


def test_tokens_whose_chunk_is_not_known_are_not_reused_past_a_chunk_end() -> None:
    # it went on from a restored state at 310: how its first 310 were computed is not known
    resident = ([310, 400], [(310, 400)])
    assert exact_reuse(305, *resident, (300, 445), (445,), 445, BUDGET) == 0
    assert exact_reuse(320, *resident, (300, 445), (445,), 445, BUDGET) == 320


def test_a_narrow_chunk_computed_alike_cold_and_warm_does_not_stop_the_reuse() -> None:
    # the question (450..470) is a narrow chunk of its own, cold and warm (a stop where the last
    # paragraph starts): the 350 tokens shared before it are reused, the rest tiled as cold
    resident = ([0, 300, 400], [(0, 300), (300, 400)])
    assert exact_reuse(350, *resident, (300, 450), (450,), 470, BUDGET) == 350
    # where the cold request does not cut there, its last 170 tokens are one tiled chunk:
    # computed as two, the narrow one rounds otherwise
    assert exact_reuse(350, *resident, (300,), (450,), 470, BUDGET) == 300


def test_rows_left_over_after_whole_groups_fall_where_a_cold_requests_do() -> None:
    # a cold request computes 0..390 in one chunk: with groups of 4, rows 388 and 389 left
    # over; going on from 290 (100 rows: 386..389 left over) would round 386 and 387 otherwise
    resident = ([0, 300], [(0, 300)])
    assert exact_reuse(290, *resident, (), (), 390, BUDGET) == 290  # no groups: all of it
    assert exact_reuse(290, *resident, (), (), 390, BUDGET, granule=4) == 288
    assert exact_reuse(295, *resident, (), (), 390, BUDGET, granule=8) == 288
    # the resident went on from 364 into a chunk of its own (rows 464..466 left over by 4):
    # those are not reused as the grouped rows a cold request's one chunk computes there
    resident = ([0, 300, 364, 467], [(0, 300), (300, 364), (364, 467)])
    assert exact_reuse(466, *resident, (300,), (), 600, BUDGET) == 466
    assert exact_reuse(466, *resident, (300,), (), 600, BUDGET, granule=4) == 464
    # where its last chunk ends at the same cut as a cold request's, it is the very same chunk
    assert exact_reuse(300, *([0, 300], [(0, 300)]), (300,), (300,), 390, BUDGET, granule=8) == 300


@given(
    st.integers(64, 900),
    st.integers(1, 400),
    st.integers(1, 400),
    st.sampled_from([1, 2, 4, 8, 16]),
)
def test_a_reuse_keeps_every_row_grouped_or_left_over_as_a_cold_request(
    common: int, resident_more: int, prompt_more: int, granule: int
) -> None:
    resident_end, num_prompt = common + resident_more, common + prompt_more
    resident = ([0, resident_end], [(0, resident_end)])
    reuse = exact_reuse(common, *resident, (), (), num_prompt, BUDGET, granule)
    cold = computed_chunks(0, num_prompt, (), BUDGET)
    own = computed_chunks(reuse, num_prompt, (), BUDGET)
    first = min(reuse, own[0][0])

    def row(at: int, chunking: list[tuple[int, int]]) -> tuple[int, int, bool]:
        a, b = next(c for c in reversed(chunking) if c[0] <= at < c[1])
        return a, b, at >= b - (b - a) % granule

    for at in range(num_prompt):
        x = row(at, [(0, resident_end)] if at < first else own)
        y = row(at, cold)
        assert x == y or (path_of(x[1] - x[0]) == path_of(y[1] - y[0]) == 2 and x[2] == y[2])


def test_rows_before_a_chunk_end_that_a_later_chunk_computed_again_are_checked() -> None:
    # 0..63 computed narrow, then 63..120 widened to the tiled 56..120: rows 56..62 are no
    # longer the narrow chunk's a cold request of 68 tokens computes them in (before: 63 reused)
    resident = ([0, 63, 120], [(0, 63), (56, 120)])
    assert exact_reuse(65, *resident, (63,), (63,), 68, BUDGET) == 0
    # rows the later chunk did not reach are still the narrow chunk's, as the cold request's
    resident = ([0, 63, 130], [(0, 63), (63, 130)])
    assert exact_reuse(65, *resident, (63,), (63,), 68, BUDGET) == 63


# a resident's history: (how far back from its end it went on, how many tokens it then
# computed, its cuts in them), as a sequence goes on from its own or another's state
HISTORY = st.lists(
    st.tuples(st.integers(0, 300), st.integers(2, 300), st.lists(st.integers(1, 900), max_size=2)),
    min_size=1,
    max_size=4,
)


def computed_by(history: list[tuple[int, int, list[int]]]) -> tuple[list[int], list]:
    """The chunk ends and chunks of a state computed by `history` (Sequence.starts_at)."""
    ends, done, end = [0], [], 0
    for back, more, cuts in history:
        start = max(0, end - back)
        ends = [e for e in ends if e < start] + [start]
        done = [c for c in done if c[0] < start]
        new = computed_chunks(start, start + more, [start + c for c in cuts], BUDGET)
        done += new
        ends += [b for _, b in new]
        end = start + more
    return ends, done


@given(
    HISTORY,
    st.lists(st.integers(1, 1200), max_size=3),
    st.integers(0, 1200),
    st.integers(1, 400),
    st.sampled_from([1, 4]),
)
def test_every_row_a_request_reuses_or_computes_is_computed_as_a_cold_requests(
    history: list, cuts: list[int], common: int, more: int, granule: int
) -> None:
    """Whatever the resident's chunks were (gone on from, widened back over earlier ones), each
    row of the prompt is in a chunk the cold request's equals, or tiled in both and grouped or
    left over in both."""
    ends, resident = computed_by(history)
    common = min(common, ends[-1])
    num_prompt = common + more
    reuse = exact_reuse(common, ends, resident, cuts, cuts, num_prompt, BUDGET, granule)
    cold = computed_chunks(0, num_prompt, cuts, BUDGET)
    kept = cuts_past(cuts, reuse, num_prompt) if reuse else cuts
    own = computed_chunks(reuse, num_prompt, kept, BUDGET)
    first = min(reuse, own[0][0])

    def row(at: int, chunking: list[tuple[int, int]]) -> tuple[int, int, bool]:
        a, b = next(c for c in reversed(chunking) if c[0] <= at < c[1])
        return a, b, at >= b - (b - a) % granule

    for at in range(num_prompt):
        x = row(at, resident if at < first else own)
        y = row(at, cold)
        assert x == y or (path_of(x[1] - x[0]) == path_of(y[1] - y[0]) == 2 and x[2] == y[2])


def test_a_request_that_reuses_nothing_is_judged_on_all_its_cuts() -> None:
    # reusing nothing, it cuts at 40 as a cold request does: exact, where going on from the
    # chunk end at 30 computes 30..40 tiled where the cold request computes them narrow
    assert exact_reuse(35, [0, 30, 200], [(0, 30), (30, 200)], (40,), (40,), 300, BUDGET) == 0
    assert exact_reuse(25, [0, 20, 30], [(0, 20), (20, 30)], (10,), (10,), 50, BUDGET) == 0


def test_the_sixty_four_before_the_end_are_tried_below_a_chunk_end_too() -> None:
    # 300..314 would run narrow where the cold request's one chunk is tiled; from 250 the rest
    # is one tiled chunk as the cold request's
    assert exact_reuse(310, [0, 300, 400], [(0, 300), (300, 400)], (), (), 314, BUDGET) == 250


def test_nothing_past_the_prompt_but_its_last_token_is_reused() -> None:
    # its narrow tail (300..328) rounds otherwise than the cold request's 300..330
    resident = ([0, 300, 328], [(0, 300), (300, 328)])
    assert exact_reuse(500, *resident, (300, 330), (330,), 330, BUDGET) == 300


def test_a_chunk_end_it_went_on_from_is_not_taken_where_the_rest_would_round_otherwise() -> None:
    # measured on SmolLM2: a request went on from 421 (an 82-token tiled chunk, exact for it);
    # the next, 438 tokens, computed 421..438 narrow from there where a cold request computes
    # the whole prompt in one tiled chunk, and answered otherwise. Now from the end before it,
    # the rest widened to the 64 before the prompt's end, tiled as the cold request's
    resident = ([0, 370, 389, 421, 504], [(0, 486), (370, 434), (389, 453), (421, 504)])
    assert exact_reuse(421, *resident, (438,), (), 438, BUDGET) == 389
    assert computed_chunks(389, 438, (), BUDGET) == [(438 - TILED_QUERIES, 438)]


SYSTEM = "You answer in one short sentence. " + filler_text(seed=9, num_words=300)
CONTEXT = filler_text(seed=11, num_words=70)
LONG = filler_text(seed=17, num_words=250)
AFTER = filler_text(seed=19, num_words=120)
QUESTIONS = (
    "Question 1: name a colour.",
    "Question 2: name a fruit.",  # a narrow tail: reused up to the header only
    f"Question 3: {CONTEXT} Name a tree.",
    f"Question 3: {CONTEXT} Name a bush.",  # a narrow tail after a wide one: the last 64 again
    f"Question 3: {CONTEXT} {filler_text(seed=13, num_words=60)} Name a bird.",
    f"Question 5: {filler_text(seed=12, num_words=70)} Name a fish.",
    f"Quick: {CONTEXT} Name a fish.",
    f"Question 7: {LONG} Name a tree.",  # past the cut at 512 (the stride)
    # 485 tokens shared, 27 short of the cut at the stride: reused all, the cut not taken
    f"Question 7: {' '.join(LONG.split()[:166])} {AFTER} Name a bird.",
    # 48 tokens after the header, narrow: a cold request computes the 64 before the end instead
    # (tiled, cheaper), and so does this one, the 16 it shares past the header computed again
    f"Question 8: {filler_text(seed=23, num_words=34)} Name a cat.",
)


@pytest.fixture(scope="module")
def cold(smollm2_path: Path) -> dict[str, list[int]]:
    """Each answer computed on an empty cache (so with a cold request's chunks)."""
    out = {}
    for q in QUESTIONS:
        settings = small_settings(smollm2_path, spec="off", prefix_cache_disk=False)
        with Runtime(settings) as runtime:
            out[q] = answer(runtime, q, SYSTEM)[0]
    return out


@pytest.mark.model
def test_questions_that_share_first_words_reuse_them_and_answer_as_cold(
    smollm2_path: Path, cold: dict[str, list[int]]
) -> None:
    # no RAM budget and no disk: only the KV left in the last request's slot can serve
    settings = small_settings(
        smollm2_path, spec="off", prefix_cache_ram_mb=0, prefix_cache_disk=False, parallel=1
    )
    with Runtime(settings) as runtime:
        service = runtime.service
        messages = chat(QUESTIONS[0], SYSTEM)
        header = service.chat.marks(messages, service.chat.prompt(messages))[0]
        cached, prompt_lengths = {}, {}
        for q in QUESTIONS:
            tokens, cached[q] = answer(runtime, q, SYSTEM)
            prompt_lengths[q] = len(service.chat.prompt(chat(q, SYSTEM)))
            assert tokens == cold[q], q
    # past the end of the system prompt and the user header, where the chunks end, when what
    # follows stays a chunk of 64 tokens or more
    assert cached[QUESTIONS[1]] == header
    assert cached[QUESTIONS[3]] == prompt_lengths[QUESTIONS[3]] - TILED_QUERIES > header
    assert cached[QUESTIONS[4]] > header + 70  # the question number and the context
    assert cached[QUESTIONS[5]] > header
    stride = runtime.cache.policy.stride
    assert prompt_lengths[QUESTIONS[-2]] > stride + TILED_QUERIES
    # all 485 shared tokens: its own cut at the stride, 27 past them, is not taken
    assert stride - TILED_QUERIES < cached[QUESTIONS[-2]] < stride
    widened = prompt_lengths[QUESTIONS[-1]] - TILED_QUERIES
    assert header - TILED_QUERIES < widened == cached[QUESTIONS[-1]] < header - WIDE_ENOUGH // 4


@pytest.mark.model
def test_a_stored_state_that_parts_from_the_prompt_serves_what_they_share_answering_as_cold(
    smollm2_path: Path, cold: dict[str, list[int]]
) -> None:
    # one sequence, taken between the two questions by another conversation: only the RAM
    # tier can serve the second, by what it shares with the first's state (not a prefix of it)
    settings = small_settings(smollm2_path, spec="off", prefix_cache_disk=False, parallel=1)
    tree, bush = QUESTIONS[2], QUESTIONS[3]
    with Runtime(settings) as runtime:
        service = runtime.service
        answer(runtime, tree, SYSTEM)
        answer(runtime, "Name a colour.", "Be terse. " + filler_text(seed=31, num_words=120))
        tokens, cached = answer(runtime, bush, SYSTEM)
        messages = chat(bush, SYSTEM)
        prompt = service.chat.prompt(messages)
        header = service.chat.marks(messages, prompt)[0]
    assert tokens == cold[bush]
    # all it shares but the 64 tokens before its end, which a cold request computes tiled
    assert cached == len(prompt) - TILED_QUERIES > header


@pytest.mark.model
def test_with_repacked_weights_answers_after_reuse_equal_a_cold_requests(gemma_path: Path) -> None:
    """Gemma 3's Q4_K_M weights: llama.cpp multiplies a chunk's rows in groups and the rows left
    over otherwise. Before the rule kept them where a cold request has them, one of the Question
    3 answers differed from a cold request's."""
    template = Path(__file__).parent / "templates" / "chatml-think-free.jinja"
    cold, warm = {}, {}
    for q in QUESTIONS:
        settings = small_settings(
            gemma_path, spec="off", prefix_cache_disk=False, chat_template_file=template
        )
        with Runtime(settings) as runtime:
            cold[q] = answer(runtime, q, SYSTEM)[0]
    settings = small_settings(
        gemma_path,
        spec="off",
        prefix_cache_ram_mb=0,
        prefix_cache_disk=False,
        parallel=1,
        chat_template_file=template,
    )
    with Runtime(settings) as runtime:
        assert runtime.engine.scheduler.reuse.granule > 1  # measured at start
        for q in QUESTIONS:
            warm[q] = answer(runtime, q, SYSTEM)
    assert {q: warm[q][0] for q in QUESTIONS} == cold
    assert sum(cached for _, cached in warm.values()) > 0  # it did reuse
