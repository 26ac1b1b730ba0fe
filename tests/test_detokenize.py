from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reame.detokenize import TextStream, held_back_length


def push_all(stream: TextStream, pieces: list[bytes]) -> tuple[str, bool]:
    out, stopped = [], False
    for piece in pieces:
        delta = stream.push(piece)
        out.append(delta.text)
        stopped = stopped or delta.is_stopped
    if not stopped:
        out.append(stream.finish())
    return "".join(out), stopped


def test_a_character_split_across_tokens_comes_out_whole() -> None:
    stream = TextStream()
    euro = "€".encode()
    assert stream.push(b"a" + euro[:1]).text == "a"
    assert stream.push(euro[1:2]).text == ""
    assert stream.push(euro[2:]).text == "€"


def test_a_stop_string_across_tokens_is_held_back_then_cut() -> None:
    stream = TextStream(["</end>"])
    assert stream.push(b"hello </").text == "hello "
    assert stream.push(b"en").text == ""
    delta = stream.push(b"d> more")
    assert delta.is_stopped
    assert delta.text == ""
    assert stream.text == "hello "


def test_held_back_text_is_released_when_it_stops_matching() -> None:
    stream = TextStream(["STOP"])
    assert stream.push(b"a ST").text == "a "
    assert stream.push(b"AR").text == "STAR"


def test_finish_flushes_what_was_held_back() -> None:
    stream = TextStream(["STOP"])
    assert stream.push(b"a ST").text == "a "
    assert stream.finish() == "ST"
    assert stream.text == "a ST"


def test_held_back_length() -> None:
    assert held_back_length("abc", ["cd", "bcx"]) == 2
    assert held_back_length("abc", ["x"]) == 0
    assert held_back_length("", ["abc"]) == 0


@given(
    text=st.text(min_size=0, max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=240), max_size=12),
    stop=st.text(min_size=1, max_size=4),
)
def test_any_split_gives_the_text_up_to_the_first_stop(
    text: str, cuts: list[int], stop: str
) -> None:
    data = text.encode()
    bounds = sorted({0, len(data), *[c % (len(data) + 1) for c in cuts]})
    pieces = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    out, stopped = push_all(TextStream([stop]), pieces)
    index = text.find(stop)
    assert out == (text[:index] if index >= 0 else text)
    assert stopped == (index >= 0)
