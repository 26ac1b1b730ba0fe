"""Response bodies and stream chunks of the OpenAI API, built from engine events. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from reame.engine.request import Finish, FinishEvent, TokenEvent

Piece = Callable[[int], str]  # token id -> its text, for logprobs


@dataclass(slots=True)
class Choice:
    """What one choice accumulated: its text, its tokens' logprobs, how it ended."""

    index: int
    parts: list[str] = field(default_factory=list)
    logprobs: list[TokenEvent] = field(default_factory=list)
    finish: FinishEvent | None = None
    thought: list[str] | None = None  # the thought's text, for an answer that may think
    said: str = ""  # streamed in inline reasoning: "" nothing, "thought" or "answer" begun

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reasoning(self) -> str | None:
        return "".join(self.thought) if self.thought is not None else None


def usage(
    num_prompt: int, num_completion: int, num_cached: int, finishes: Iterable[FinishEvent] = ()
) -> dict[str, object]:
    """`finishes`: the answers whose draft tokens are counted (OpenAI's prediction tokens:
    Reame's drafts are predictions it makes itself)."""
    accepted = rejected = reasoning = 0
    for f in finishes:
        accepted += f.num_accepted_drafts
        rejected += f.num_rejected_drafts
        reasoning += f.num_reasoning_tokens
    return {
        "prompt_tokens": num_prompt,
        "completion_tokens": num_completion,
        "total_tokens": num_prompt + num_completion,
        "prompt_tokens_details": {"cached_tokens": num_cached},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "accepted_prediction_tokens": accepted,
            "rejected_prediction_tokens": rejected,
        },
    }


def choices_usage(prompt_lengths: Sequence[int], choices: Sequence[Choice], n: int) -> dict:
    """Each prompt counts once, however many (`n`) choices it has, as OpenAI counts it."""
    firsts = range(0, len(choices), n)
    prompt = sum(prompt_lengths[i] for i in firsts)
    cached = sum(f.num_cached_tokens for i in firsts if (f := choices[i].finish))
    finishes = [c.finish for c in choices if c.finish]
    completion = sum(f.num_completion_tokens for f in finishes)
    return usage(prompt, completion, cached, finishes)


def finish_reason(event: FinishEvent) -> str:
    return "length" if event.reason == Finish.LENGTH else "stop"


def chat_logprobs(events: list[TokenEvent], piece: Piece) -> dict[str, object]:
    def entry(token: int, logprob: float) -> dict[str, object]:
        text = piece(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode())}

    return {
        "content": [
            {
                **entry(e.token, e.logprob or 0.0),
                "top_logprobs": [entry(t, lp) for t, lp in e.top_logprobs],
            }
            for e in events
        ]
    }


def completion_logprobs(
    events: list[TokenEvent], piece: Piece, offset: int = 0
) -> dict[str, object]:
    tokens = [piece(e.token) for e in events]
    offsets = []
    for text in tokens:
        offsets.append(offset)
        offset += len(text)
    return {
        "tokens": tokens,
        "token_logprobs": [e.logprob for e in events],
        "top_logprobs": [{piece(t): lp for t, lp in e.top_logprobs} for e in events],
        "text_offset": offsets,
    }


def _envelope(rid: str, created: int, model: str, obj: str, choices: list[dict]) -> dict:
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}


def response(
    rid: str,
    created: int,
    model: str,
    choices: list[Choice],
    piece: Piece,
    with_logprobs: bool,
    totals: dict[str, object],
    is_chat: bool,
    inline: tuple[str, str] | None = None,
) -> dict[str, object]:
    """A whole (non-streamed) chat.completion or text_completion. `inline`: the thought's
    markers, where it stays in content (reasoning_format "inline")."""
    logprobs_of = chat_logprobs if is_chat else completion_logprobs
    body = []
    for c in choices:
        answer = {"message": chat_message(c, inline)} if is_chat else {"text": c.text}
        body.append(
            {
                "index": c.index,
                **answer,
                "logprobs": logprobs_of(c.logprobs, piece) if with_logprobs else None,
                "finish_reason": finish_reason(c.finish) if c.finish else None,
            }
        )
    obj = "chat.completion" if is_chat else "text_completion"
    return {**_envelope(rid, created, model, obj, body), "usage": totals}


def chat_message(choice: Choice, inline: tuple[str, str] | None) -> dict[str, object]:
    """The assistant message: its thought apart (`reasoning_content`, as llama-server and
    DeepSeek's API give it), or inline between its markers."""
    reasoning = choice.reasoning
    if not reasoning:  # NOTE: no thought (the model did not open one): as llama-server, no key
        return {"role": "assistant", "content": choice.text}
    if inline is not None:
        return {"role": "assistant", "content": f"{inline[0]}{reasoning}{inline[1]}{choice.text}"}
    return {"role": "assistant", "content": choice.text, "reasoning_content": reasoning}


def thought_delta(
    choice: Choice, reasoning: str, text: str, inline: tuple[str, str] | None
) -> dict:
    """A streamed delta's thought and answer: `reasoning_content` then `content`, or inline
    with the markers written where the thought begins and ends."""
    if inline is None:
        delta: dict[str, object] = {"reasoning_content": reasoning} if reasoning else {}
        if text:
            delta["content"] = text
        return delta
    out = ""
    if reasoning:
        out += (inline[0] if not choice.said else "") + reasoning
        choice.said = choice.said or "thought"
    if text:
        out += (inline[1] if choice.said == "thought" else "") + text
        choice.said = "answer"
    return {"content": out} if out else {}


def chat_chunk(
    rid: str,
    created: int,
    model: str,
    index: int,
    delta: dict[str, object],
    finish: str | None = None,
    logprobs: dict[str, object] | None = None,
) -> dict[str, object]:
    choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    return _envelope(rid, created, model, "chat.completion.chunk", [choice])


def completion_chunk(
    rid: str,
    created: int,
    model: str,
    index: int,
    text: str,
    finish: str | None = None,
    logprobs: dict[str, object] | None = None,
) -> dict[str, object]:
    choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
    return _envelope(rid, created, model, "text_completion", [choice])


def usage_chunk(rid: str, created: int, model: str, obj: str, totals: dict[str, object]) -> dict:
    return {**_envelope(rid, created, model, obj, []), "usage": totals}
