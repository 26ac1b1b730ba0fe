"""`reame bench --replay`'s traces, generated from a seed without a server: a multi-turn chat
behind one system prompt, an agent loop with tools, extraction to JSON by a schema, and RAG over
retrieved passages that repeat with a set overlap. A request of a multi-turn trace depends on
the answer to the one before it in its conversation: `next_messages` builds what is sent from
the messages sent last time and the reply the server actually gave."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reame_bench.replay_text import paragraph, person, policy, question, task, tool_result

TRACES = ("chat", "agent", "extract", "rag", "retrieval", "thinking")
COMPANY = "Northwind Supplies"
AGENT_TURNS = 10  # requests of one agent task: the task, then tool results fed back
RAG_POOL = 48  # retrieved passages the questions draw from
RAG_CHUNKS = 8  # passages a question: every overlap level below is a whole number of them
RAG_BLOCK = 5  # questions of one conversation: the first shares nothing, the rest one level
OVERLAPS = (1.0, 0.75, 0.5, 0.25, 0.0)  # the blocks' levels, in turn
RETRIEVAL_POOL, RETRIEVAL_TOP = 10, 3  # a question's passages of the pool's
THINKING_CONVERSATIONS = 4
THINKING_PAUSE = 1.0  # seconds a user reads an answer before the next turn

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a trace. `new`: the messages this turn adds after the conversation so
    far (a first turn's, or a request `with_history` False, are its whole prompt);
    `tool_result`: what the tool called in the reply before returned; `overlap`: the share of
    passages this question shares with the one before (rag); `chunks`: which passages, in
    order."""

    index: int  # from 1, in the order one client sends the trace
    conversation: int
    turn: int  # from 1 within its conversation
    new: tuple[Message, ...]
    options: dict[str, Any] = field(default_factory=dict)  # tools, response_format
    tool_result: str | None = None
    overlap: float | None = None
    chunks: tuple[int, ...] = ()
    with_history: bool = True  # False: a question of its own, only after the one before
    pause: float = 0.0  # seconds the client waits before sending it (a user reading)


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    requests: tuple[Request, ...]
    conversations: int
    summary: str  # one line for the report


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    name: str
    arguments: str  # JSON text


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer as the server returned it."""

    text: str
    calls: tuple[Call, ...] = ()

    def complete_calls(self) -> tuple[Call, ...]:
        """The calls that can go back to a server: an id, a name and arguments that are a JSON
        object (an answer cut at max_tokens can end inside one)."""
        return tuple(c for c in self.calls if c.id and c.name and _is_json_object(c.arguments))

    def as_text(self) -> str:
        """The text, then each call as name(arguments)."""
        return " ".join([self.text, *(f"{c.name}({c.arguments})" for c in self.calls)]).strip()


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def assistant_message(reply: Reply) -> Message:
    """A reply whose calls cannot go back is sent back as the text it is, calls and all."""
    calls = reply.complete_calls()
    if not calls:
        return {"role": "assistant", "content": reply.as_text()}
    return {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }  # fmt: skip


def tool_messages(reply: Reply, result: str) -> list[Message]:
    """The tool's result: a `tool` message for each call the reply made; a reply that called
    no tool (a model may answer in words) is told the result as the user."""
    calls = reply.complete_calls()
    if not calls:
        return [{"role": "user", "content": f"Tool result: {result}"}]
    return [{"role": "tool", "tool_call_id": c.id, "content": result} for c in calls]


def next_messages(
    request: Request, sent: Sequence[Message] | None, reply: Reply | None
) -> list[Message]:
    """What `request` sends: its conversation's last messages, the reply to them, then this
    turn's (the whole history every turn, as clients without sessions do)."""
    if request.turn == 1 or not request.with_history or sent is None or reply is None:
        return list(request.new)
    out = [*sent, assistant_message(reply)]
    if request.tool_result is not None:
        out += tool_messages(reply, request.tool_result)
    return out + list(request.new)


def request_body(
    model: str, request: Request, messages: Sequence[Message], max_tokens: int
) -> dict[str, Any]:
    """Greedy and streamed with usage, as a client sends it; no `ignore_eos`: answers end where
    the model ends them, as in real traffic."""
    return {
        "model": model,
        "messages": list(messages),
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **request.options,
    }


def chat_trace(num_requests: int, conversations: int, system_words: int, seed: int) -> Trace:
    """`conversations` chats behind one system prompt, their turns taken in turn."""
    rng = random.Random(f"chat-{seed}")
    system = {"role": "system", "content": policy(rng, COMPANY, system_words)}
    requests = []
    for i in range(num_requests):
        conversation, turn = i % conversations, i // conversations + 1
        ask = {"role": "user", "content": question(rng)}
        new = (system, ask) if turn == 1 else (ask,)
        requests.append(Request(i + 1, conversation, turn, new))
    summary = (
        f"{conversations} conversations behind one system prompt of {system_words} words, "
        "their turns in turn, the whole history sent every turn"
    )
    return Trace("chat", tuple(requests), conversations, summary)


def thinking_trace(num_requests: int, system_words: int, seed: int) -> Trace:
    """The chat trace for a model that thinks: THINKING_CONVERSATIONS chats behind one system
    prompt, their turns in turn, a user's pause before each later turn. The servers are started
    with the same template and thought budget (`--chat-template-file`, `--reasoning-budget`)."""
    rng = random.Random(f"thinking-{seed}")
    system = {"role": "system", "content": policy(rng, COMPANY, system_words)}
    conversations = THINKING_CONVERSATIONS
    requests = []
    for i in range(num_requests):
        conversation, turn = i % conversations, i // conversations + 1
        ask = {"role": "user", "content": question(rng)}
        new = (system, ask) if turn == 1 else (ask,)
        pause = THINKING_PAUSE if turn > 1 else 0.0
        requests.append(Request(i + 1, conversation, turn, new, pause=pause))
    summary = (
        f"{conversations} conversations with a model that thinks, behind one system prompt of "
        f"{system_words} words, their turns in turn, the whole history sent every turn (the "
        f"thoughts left out, as clients do), {THINKING_PAUSE:g} s of a user's pause before "
        "each later turn"
    )
    return Trace("thinking", tuple(requests), conversations, summary)


TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {
            # NOTE: short values, so that a call fits in a small max_tokens
            key: {"type": "string", "description": about, "maxLength": 24}
            for key, about in properties.items()
        }, "required": list(properties)},
    }}
    for name, description, properties in (
        ("find_order", "Find a customer's order by the customer's name and the date sent",
         {"customer": "full name", "date": "day the order was sent"}),
        ("order_status", "The status and location of an order",
         {"order_id": "the order's id, as A1234"}),
        ("office_hours", "When an office is open", {"office": "the office's name"}),
        ("send_message", "Send the customer a message",
         {"customer": "full name", "text": "what to say"}),
    )
]  # fmt: skip


def agent_trace(num_requests: int, system_words: int, seed: int) -> Trace:
    """Agent tasks one after another, AGENT_TURNS requests each: the task, then each turn the
    tool result fed back; the same long system prompt and tools every turn."""
    rng = random.Random(f"agent-{seed}")
    system = policy(rng, COMPANY, system_words) + (
        " Use the tools to look things up; call one tool at a time, then use its result."
    )
    options = {"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False}
    requests = []
    for i in range(num_requests):
        conversation, turn = divmod(i, AGENT_TURNS)
        if turn == 0:
            new: tuple[Message, ...] = (
                {"role": "system", "content": system},
                {"role": "user", "content": task(rng)},
            )
            requests.append(Request(i + 1, conversation, 1, new, options))
        else:
            result = tool_result(rng)
            requests.append(Request(i + 1, conversation, turn + 1, (), options, result))
    tasks = -(-num_requests // AGENT_TURNS)
    summary = (
        f"{tasks} agent tasks of {AGENT_TURNS} turns, one after another: a system prompt of "
        f"{system_words} words and {len(TOOLS)} tools every turn, each tool result fed back"
    )
    return Trace("agent", tuple(requests), tasks, summary)


PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer"},
        "city": {"type": "string", "maxLength": 30},
        "job": {"type": "string", "maxLength": 30},
    },
    "required": ["name", "age", "city", "job"],
    "additionalProperties": False,
}


def extract_trace(num_requests: int, system_words: int, seed: int) -> Trace:
    """A different short memo each request, behind the same instruction, schema and worked
    examples (as many as fill `system_words`); the answer constrained by the schema."""
    rng = random.Random(f"extract-{seed}")
    parts = [
        "Extract the person a staff memo is about. Reply with one JSON object and nothing "
        f"else, matching this JSON schema: {json.dumps(PERSON_SCHEMA)}. Examples follow."
    ]
    while sum(len(p.split()) for p in parts) < system_words:
        memo, record = person(rng)
        parts.append(f"Memo: {memo}\nJSON: {json.dumps(record)}")
    system = {"role": "system", "content": "\n\n".join(parts)}
    options = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True},
        }
    }
    requests = tuple(
        Request(i + 1, i, 1, (system, {"role": "user", "content": person(rng)[0]}), options)
        for i in range(num_requests)
    )
    summary = (
        f"{num_requests} memos, each its own request, behind one instruction with the schema "
        f"and {len(parts) - 1} worked examples ({system_words} words)"
    )
    return Trace("extract", requests, num_requests, summary)


def rag_trace(num_requests: int, passage_words: int, seed: int) -> Trace:
    """Questions over RAG_CHUNKS retrieved passages each (`passage_words` in all, about), in
    conversations of RAG_BLOCK: the
    first question's passages share none with the question before; each later one keeps the
    first `overlap` share of the previous passages, in order (the ones a retriever ranks first
    again), then new ones; the blocks take the OVERLAPS levels in turn."""
    rng = random.Random(f"rag-{seed}")
    chunk_words = max(1, passage_words // RAG_CHUNKS)
    pool = [paragraph(rng, chunk_words) for _ in range(RAG_POOL)]
    system = {
        "role": "system",
        "content": "Answer the question from the numbered passages only, in one or two "
        "sentences, and give the numbers of the passages you used.",
    }
    requests = []
    previous: tuple[int, ...] = ()
    for i in range(num_requests):
        block, position = divmod(i, RAG_BLOCK)
        level = OVERLAPS[block % len(OVERLAPS)] if position else 0.0
        kept = previous[: round(level * RAG_CHUNKS)]
        fresh = rng.sample(
            [c for c in range(RAG_POOL) if c not in previous], RAG_CHUNKS - len(kept)
        )
        chunks = (*kept, *fresh)
        passages = "\n\n".join(f"[{c + 1}] {pool[c]}" for c in chunks)
        ask = f"Passages:\n\n{passages}\n\nQuestion: {question(rng)}"
        new = (system, {"role": "user", "content": ask})
        requests.append(
            Request(i + 1, block, position + 1, new, overlap=level, chunks=chunks,
                    with_history=False)
        )  # fmt: skip
        previous = chunks
    blocks = -(-num_requests // RAG_BLOCK)
    levels = "/".join(f"{round(100 * o)}" for o in OVERLAPS)
    summary = (
        f"{num_requests} questions over {RAG_CHUNKS} of {RAG_POOL} passages of about "
        f"{chunk_words} words, in {blocks} runs of {RAG_BLOCK} sharing {levels}% of the "
        "passages of the question before (the shared ones first)"
    )
    return Trace("rag", tuple(requests), blocks, summary)


def retrieval_trace(num_requests: int, passage_words: int, seed: int) -> Trace:
    """Questions over RETRIEVAL_TOP of RETRIEVAL_POOL passages (`passage_words` in all, about)
    behind a short system prompt, as a retriever returns them: popular passages more often (the
    k-th drawn with weight 1/k), in the order drawn, which changes from question to question."""
    rng = random.Random(f"retrieval-{seed}")
    chunk_words = max(1, passage_words // RETRIEVAL_TOP)
    pool = [paragraph(rng, chunk_words) for _ in range(RETRIEVAL_POOL)]
    weights = [1 / (k + 1) for k in range(RETRIEVAL_POOL)]
    system = {"role": "system", "content": "Answer from the passages only, in one sentence."}
    requests = []
    for i in range(num_requests):
        chunks: list[int] = []
        while len(chunks) < RETRIEVAL_TOP:
            [drawn] = rng.choices(range(RETRIEVAL_POOL), weights)
            if drawn not in chunks:
                chunks.append(drawn)
        passages = "\n\n".join(pool[c] for c in chunks)
        ask = f"{passages}\n\nQuestion: {question(rng)}"
        new = (system, {"role": "user", "content": ask})
        requests.append(Request(i + 1, i, 1, new, chunks=tuple(chunks), with_history=False))
    summary = (
        f"{num_requests} questions over {RETRIEVAL_TOP} of {RETRIEVAL_POOL} passages of about "
        f"{chunk_words} words, popular ones more often, in the order drawn"
    )
    return Trace("retrieval", tuple(requests), num_requests, summary)


def build_trace(name: str, num_requests: int, parallel: int, system_words: int, seed: int) -> Trace:
    """The chat has twice as many conversations as the server has sequences; `system_words`
    is the size of what a trace's requests share: the system prompt, or rag's passages."""
    if name == "chat":
        return chat_trace(num_requests, 2 * parallel, system_words, seed)
    if name == "agent":
        return agent_trace(num_requests, system_words, seed)
    if name == "extract":
        return extract_trace(num_requests, system_words, seed)
    if name == "rag":
        return rag_trace(num_requests, system_words, seed)
    if name == "retrieval":
        return retrieval_trace(num_requests, system_words, seed)
    if name == "thinking":
        return thinking_trace(num_requests, system_words, seed)
    raise ValueError(f"no trace {name!r}")


def lane_requests(trace: Trace, users: int) -> list[list[Request]]:
    """Each user's requests, in the trace's order: user u holds conversations u, u + users, ..."""
    out: list[list[Request]] = [[] for _ in range(users)]
    for r in trace.requests:
        out[r.conversation % users].append(r)
    return [lane for lane in out if lane]
