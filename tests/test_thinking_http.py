"""Thinking through the real `openai` client against `reame serve` on the embedded SmolLM2,
with two thinking templates written for the tests: one whose generation prompt opens the
thought (as Qwen3.5's), one where the model opens it (as Qwen3's). Both drop earlier turns'
thoughts from the history, so a later turn's history is computed ahead."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import jsonschema
import pytest
from openai import BadRequestError, OpenAI

from reame.llama.model import Model
from reame_command import reame_command
from server_process import ServerProcess, free_port, small_server
from state_dirs import new_state_dir

pytestmark = pytest.mark.model

TEMPLATES = Path(__file__).parent / "templates"
BUDGET = {"reasoning_budget": 8}  # a random-weight model would think to max_tokens
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(
        "--chat-template-file", str(TEMPLATES / "chatml-think-open.jinja"), context_length=1024
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def ask(client: OpenAI, messages=QUESTION, model: str = "smollm2-135m", **kwargs):
    kwargs.setdefault("max_tokens", 96)
    return client.chat.completions.create(model=model, messages=messages, temperature=0, **kwargs)


def reasoning_of(message) -> str | None:
    return (message.model_extra or {}).get("reasoning_content")


def test_the_thought_comes_apart_from_the_answer(client: OpenAI) -> None:
    r = ask(client)
    message = r.choices[0].message
    assert reasoning_of(message) and message.content
    assert "<think>" not in message.content and "</think>" not in message.content
    assert 0 < r.usage.completion_tokens_details.reasoning_tokens < r.usage.completion_tokens


def test_streamed_the_thought_comes_first_and_reads_as_the_whole(client: OpenAI) -> None:
    whole = ask(client).choices[0].message
    thought, answer, order = [], [], []
    stream = ask(client, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if text := (delta.model_extra or {}).get("reasoning_content"):
            thought.append(text)
            order.append("thought")
        if delta.content:
            answer.append(delta.content)
            order.append("answer")
    assert "".join(thought) == reasoning_of(whole)
    assert "".join(answer) == whole.content
    assert order.index("answer") > order.index("thought")
    assert "thought" not in order[order.index("answer") :]


def test_a_budget_closes_the_thought_and_an_answer_follows(client: OpenAI) -> None:
    r = ask(client, extra_body={"reasoning_budget": 3})
    assert r.usage.completion_tokens_details.reasoning_tokens == 3
    assert reasoning_of(r.choices[0].message) and r.choices[0].message.content


def test_effort_none_thinks_not_at_all(client: OpenAI) -> None:
    r = ask(client, reasoning_effort="none")
    assert r.usage.completion_tokens_details.reasoning_tokens == 0
    assert reasoning_of(r.choices[0].message) is None
    assert r.choices[0].message.content


def test_a_schema_answer_is_valid_after_a_thought(client: OpenAI) -> None:
    r = ask(
        client,
        messages=[{"role": "user", "content": "Maria is 34. Give her as JSON."}],
        extra_body={"reasoning_budget": 8},
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}},
    )
    message = r.choices[0].message
    assert reasoning_of(message)
    jsonschema.validate(json.loads(message.content), PERSON)


@pytest.mark.parametrize("stream", [False, True])
def test_a_required_tool_call_is_valid_after_a_thought(client: OpenAI, stream: bool) -> None:
    messages = [{"role": "user", "content": "What is the weather in Rome?"}]
    kwargs = {"tools": [WEATHER], "tool_choice": "required", "extra_body": {"reasoning_budget": 6}}
    if not stream:
        message = ask(client, messages, **kwargs).choices[0].message
        calls, thought = message.tool_calls, reasoning_of(message)
        arguments = calls[0].function.arguments
    else:
        thought, parts = "", []
        for chunk in ask(client, messages, stream=True, **kwargs):
            delta = chunk.choices[0].delta if chunk.choices else None
            if delta is None:
                continue
            thought += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or []:
                if call.index == 0:  # NOTE: the model may call more than once
                    parts.append(call.function.arguments or "")
        arguments = "".join(parts)
    assert thought
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])


def test_a_conclave_votes_on_answers_not_thoughts(server: ServerProcess) -> None:
    import httpx

    body = {
        "model": "smollm2-135m",
        "messages": [{"role": "user", "content": "What is 2+2? Answer with a number."}],
        "best_of": 3,
        "vote_on": "number",
        "temperature": 0.7,
        "seed": 5,
        "max_tokens": 64,
        "reasoning_budget": 6,
    }
    r = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120).json()
    message = r["choices"][0]["message"]
    assert message.get("reasoning_content") and message["content"]
    tally = r["conclave"]["tally"]
    assert sum(tally.values()) >= 1
    assert all(key in message["content"] for key in tally if tally[key] == max(tally.values()))


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"reasoning_budget": -1}, "reasoning_budget"),
        ({"reasoning_budget": 97}, "reasoning_budget"),
        ({"chat_template_kwargs": {"enable_thinking": [1]}}, "chat_template_kwargs"),
        ({"chat_template_kwargs": "enable_thinking"}, "chat_template_kwargs"),
    ],
)
def test_bad_thinking_controls_are_400s(client: OpenAI, extra: dict, param: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        ask(client, extra_body=extra)
    assert param in str(caught.value)


def test_chat_template_kwargs_reach_the_template(client: OpenAI) -> None:
    r = ask(client, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.usage.completion_tokens_details.reasoning_tokens == 0
    assert reasoning_of(r.choices[0].message) is None


def test_a_later_turn_goes_on_from_its_history_computed_ahead_and_answers_as_cold(
    client: OpenAI,
) -> None:
    later_turn_equals_cold(client, ())


def test_a_new_conversation_behind_a_system_prompt_goes_on_from_its_end_as_a_cold_one(
    client: OpenAI,
) -> None:
    """A second conversation behind a system prompt another one's first turn computed goes on
    from the system prompt's end and computes only its question and generation prompt (an
    answer's start, cut a few tokens past that end, made it go back a tiled chunk: 64 tokens
    more), and its first tokens' logprobs are a fresh server's, bit for bit."""
    system = {"role": "system", "content": "You answer questions about rivers. " * 12}
    questions = ("Which river flows through Paris?", "Which river flows through Rome?")
    asked = [[system, {"role": "user", "content": q}] for q in questions]
    ask(client, asked[0], max_tokens=16, extra_body=BUDGET)
    warm = ask(client, asked[1], max_tokens=16, logprobs=True, extra_body=BUDGET)
    computed = warm.usage.prompt_tokens - warm.usage.prompt_tokens_details.cached_tokens
    assert computed < 32, computed
    fresh = small_server(
        "--chat-template-file", str(TEMPLATES / "chatml-think-open.jinja"), context_length=1024
    )
    try:
        c = OpenAI(base_url=f"{fresh.url}/v1", api_key="unused", max_retries=0)
        cold = ask(c, asked[1], max_tokens=16, logprobs=True, extra_body=BUDGET)
    finally:
        fresh.stop()
    assert cold.usage.prompt_tokens_details.cached_tokens == 0
    logprobs = [[t.logprob for t in r.choices[0].logprobs.content] for r in (warm, cold)]
    assert logprobs[0] == logprobs[1]


def history_computed_after(server: ServerProcess, client: OpenAI, messages: list[dict]):
    """A turn's answer, and the history tokens then computed ahead of the next turn."""
    name = "reame_history_ahead_tokens_total"
    before = server.metric(name)
    answer = ask(client, messages, max_tokens=48, extra_body=BUDGET)
    deadline = time.monotonic() + 30
    while server.metric(name) == before:
        assert time.monotonic() < deadline, "no history computed ahead"
        time.sleep(0.1)
    return answer, server.metric(name) - before


def test_a_turn_that_restored_nothing_has_its_history_computed_from_its_answer(
    server: ServerProcess, client: OpenAI
) -> None:
    """Two system prompts that differ at their end (the day): the second's turn restores
    nothing of the first's state (it would not compute as a cold request does), yet its chunks
    end where its answer starts, so its history is computed from there, not from its start
    (492 tokens were computed where 58 would do), and the next turn answers as cold."""
    preamble = "You answer questions about geography. " * 20
    for day in ("Monday", "Tuesday"):
        system = {"role": "system", "content": f"{preamble}Today is {day}."}
        messages = [system, {"role": "user", "content": "What is the capital of Spain?"}]
        first, computed = history_computed_after(server, client, messages)
        # the answer and the end of its turn, in one tiled chunk at most
        assert computed <= 64 < first.usage.prompt_tokens / 2, (day, computed)
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And of Portugal?"},
    ]
    warm = ask(client, messages, max_tokens=48, extra_body=BUDGET)
    assert warm.usage.prompt_tokens_details.cached_tokens >= warm.usage.prompt_tokens - 16
    answer_as_cold([messages], [warm.choices[0].message])


def test_histories_queued_when_the_server_stops_are_computed_and_found_after_its_restart() -> None:
    """Stop 56: three conversations' first turns back to back (no idle time between them, so
    their histories wait, one for each of the four sequences at most), then the server stopped
    at once: what still waited was dropped (the last turn's history at least), and its second
    turn after the restart computed its first turn's answer again (64 tokens). Now they are
    computed before the process exits (idle_work_on_stop_seconds) and stored."""
    args = ("--chat-template-file", str(TEMPLATES / "chatml-think-open.jinja"))
    env = {"REAME_STATE_DIR": str(new_state_dir())}
    system = {"role": "system", "content": "You answer questions about geography. " * 10}
    countries = ("Spain", "Italy", "Norway")
    firsts = [
        [system, {"role": "user", "content": f"What is the capital of {c}?"}] for c in countries
    ]
    server = small_server(*args, parallel=4, context_length=1024, env=env)
    try:
        c = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        answers = [ask(c, m, max_tokens=48, extra_body=BUDGET).choices[0].message for m in firsts]
    finally:
        assert server.stop() == 0
    server = small_server(*args, parallel=4, context_length=1024, env=env)
    try:
        c = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        sent, got = [], []
        for first, answer in zip(firsts, answers, strict=True):
            messages = [
                *first,
                {"role": "assistant", "content": answer.content},
                {"role": "user", "content": "And its largest river?"},
            ]
            warm = ask(c, messages, max_tokens=48, extra_body=BUDGET)
            computed = warm.usage.prompt_tokens - warm.usage.prompt_tokens_details.cached_tokens
            assert computed <= 16, computed  # the new question and the generation prompt
            sent.append(messages)
            got.append(warm.choices[0].message)
    finally:
        server.stop()
    answer_as_cold(sent, got)


def later_turn_equals_cold(client: OpenAI, args: tuple[str, ...], model: str = "smollm2-135m"):
    """Three turns; the second and third, each after its history was computed ahead, reuse
    all of it and answer as a server without a prefix cache does."""
    system = {"role": "system", "content": "You answer questions about geography. " * 10}
    messages = [system, {"role": "user", "content": "What is the capital of Spain?"}]
    sent, got = [], []
    message = (
        ask(client, messages, model=model, max_tokens=48, extra_body=BUDGET).choices[0].message
    )
    assert message.content  # an answer after the thought
    for question in ("And of Portugal?", "And of Greece?"):
        time.sleep(1.5)  # NOTE: the idle time in which the history is computed ahead
        messages = [
            *messages,
            {"role": "assistant", "content": message.content},  # as clients send it back
            {"role": "user", "content": question},
        ]
        warm = ask(client, messages, model=model, max_tokens=48, extra_body=BUDGET)
        new_tokens = 16  # the new question and the generation prompt, about
        details = warm.usage.prompt_tokens_details
        assert details.cached_tokens >= warm.usage.prompt_tokens - new_tokens
        message = warm.choices[0].message
        sent.append(list(messages))
        got.append(message)
    answer_as_cold(sent, got, args, model)


def answer_as_cold(sent: list, got: list, args: tuple[str, ...] = (), model="smollm2-135m"):
    """Each of `got` (the answers to `sent`) is what a server without a prefix cache answers."""
    cold = small_server(
        *args,
        "--chat-template-file",
        str(TEMPLATES / "chatml-think-open.jinja"),
        context_length=1024,
        env={"REAME_PREFIX_CACHE": "false"},
    )
    try:
        client_cold = OpenAI(base_url=f"{cold.url}/v1", api_key="unused", max_retries=0)
        for messages, warm_message in zip(sent, got, strict=True):
            expected = ask(client_cold, messages, model=model, max_tokens=48, extra_body=BUDGET)
            assert expected.usage.prompt_tokens_details.cached_tokens == 0
            assert warm_message.content == expected.choices[0].message.content
            assert reasoning_of(warm_message) == reasoning_of(expected.choices[0].message)
    finally:
        cold.stop()


def test_a_model_that_opens_its_thought_itself_is_read_apart(smollm2_path: Path) -> None:
    """SmolLM2 never writes <think> by itself: a system prompt that asks for it and a small
    logit bias on its first token (`<`) make it; a larger bias makes it write only `<`."""
    srv = small_server(
        "--chat-template-file", str(TEMPLATES / "chatml-think-free.jinja"), context_length=1024
    )
    system = (
        "Always think first: begin every reply with <think>, write your thoughts, close with "
        "</think>, then answer. Example reply: <think>The user greets me.</think> Hello!"
    )
    messages = [{"role": "system", "content": system}, *QUESTION]
    try:
        c = OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0)
        plain = ask(c)
        assert reasoning_of(plain.choices[0].message) is None  # it did not open one
        bias = {str(_first_token_of(smollm2_path, "<think>")): 5}
        opened = ask(c, messages, logit_bias=bias, extra_body={"speculation": "off"})
        thought = reasoning_of(opened.choices[0].message)
        assert thought and not thought.startswith("<think>")
        assert opened.choices[0].message.content
        assert opened.usage.completion_tokens_details.reasoning_tokens > 4
        bounded = ask(
            c, messages, logit_bias=bias, extra_body={"speculation": "off", "reasoning_budget": 4}
        )
        assert bounded.usage.completion_tokens_details.reasoning_tokens == 4
        assert bounded.choices[0].message.content
    finally:
        srv.stop()


def _first_token_of(path: Path, text: str) -> int:
    model = Model(path)
    try:
        return model.tokenize(text, add_special=False)[0]
    finally:
        model.close()


def test_a_template_file_that_does_not_render_stops_the_start_with_one_line(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ raise_exception('no system messages here') }}")
    for path in (bad, tmp_path / "missing.jinja"):
        command = ["serve", "--port", str(free_port()), "--chat-template-file", str(path)]
        done = reame_command(*command, timeout=120)
        assert done.returncode != 0
        line = done.stderr.strip().splitlines()[-1]
        assert "chat_template_file" in line and str(path) in line


def test_inline_format_leaves_the_thought_in_content_between_its_markers() -> None:
    srv = small_server(
        "--chat-template-file",
        str(TEMPLATES / "chatml-think-open.jinja"),
        context_length=1024,
        env={"REAME_REASONING_FORMAT": "inline"},
    )
    try:
        c = OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0)
        whole = ask(c, extra_body={"reasoning_budget": 4}).choices[0].message
        assert reasoning_of(whole) is None
        assert whole.content.startswith("<think>") and "</think>" in whole.content
        streamed = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in ask(c, stream=True, extra_body={"reasoning_budget": 4})
            if chunk.choices
        )
        assert streamed == whole.content
        bound = (
            ask(
                c,
                messages=[{"role": "user", "content": "Maria is 34. Give her as JSON."}],
                extra_body={"reasoning_budget": 4},
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "p", "schema": PERSON},
                },
            )
            .choices[0]
            .message
        )
        assert reasoning_of(bound)  # under a schema, always apart
        jsonschema.validate(json.loads(bound.content), PERSON)
    finally:
        srv.stop()


def test_through_the_messages_api_the_thought_is_a_thinking_block(
    server: ServerProcess, client: OpenAI
) -> None:
    """The anthropic SDK, unmodified: the chat's thought as a thinking block before the text,
    streamed as thinking deltas then text deltas; thinking disabled, none."""
    chat = ask(client, extra_body={"reasoning_budget": 8}).choices[0].message
    messages = anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0).messages
    asked = {
        "model": "smollm2-135m",
        "max_tokens": 96,
        "messages": QUESTION,
        "thinking": {"type": "enabled", "budget_tokens": 8},
        "extra_body": {"temperature": 0},
    }
    made = messages.create(**asked)
    assert [b.type for b in made.content] == ["thinking", "text"]
    assert made.content[0].thinking == reasoning_of(chat) and made.content[1].text == chat.content
    with messages.stream(**asked) as stream:
        kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    assert kinds.index("text_delta") > kinds.index("thinking_delta")
    assert final.content[0].thinking == made.content[0].thinking
    assert final.content[1].text == made.content[1].text
    plain = messages.create(**{**asked, "thinking": {"type": "disabled"}})
    assert [b.type for b in plain.content] == ["text"]


def test_through_the_responses_api_the_thought_is_a_reasoning_item(
    server: ServerProcess, client: OpenAI
) -> None:
    """The openai SDK's responses calls: the chat's thought as a reasoning item before the
    message, streamed as reasoning deltas then text deltas; effort none, no thought; a call
    chained on it reads as the same conversation sent whole (the thought sent back as a
    reasoning item). Whether it reuses the rewritten history is warm-ahead's, self-regulated:
    test_a_later_turn_goes_on_from_its_history_computed_ahead_and_answers_as_cold."""
    chat = ask(client, reasoning_effort="low").choices[0].message
    asked = {
        "model": "smollm2-135m",
        "input": QUESTION[0]["content"],
        "max_output_tokens": 96,
        "temperature": 0,
        "reasoning": {"effort": "low"},
    }
    made = client.responses.create(**asked)
    assert [item.type for item in made.output] == ["reasoning", "message"]
    assert made.output[0].content[0].text == reasoning_of(chat)
    assert made.output_text == chat.content
    with client.responses.stream(**asked) as stream:
        kinds = [e.type for e in stream if e.type.endswith(".delta")]
        final = stream.get_final_response()
    assert kinds.index("response.output_text.delta") > kinds.index("response.reasoning_text.delta")
    assert final.output[0].content[0].text == made.output[0].content[0].text
    assert final.output_text == made.output_text
    plain = client.responses.create(**{**asked, "reasoning": {"effort": "none"}})
    assert [item.type for item in plain.output] == ["message"]
    later = client.responses.create(
        **{**asked, "input": "And of Italy?", "previous_response_id": made.id}
    )
    # the same conversation sent whole: the chain kept the thought and the answer as they were
    conversation = [
        {"role": "user", "content": QUESTION[0]["content"]},
        *[item.model_dump(exclude_none=True) for item in made.output],
        {"role": "user", "content": "And of Italy?"},
    ]
    whole = client.responses.create(**{**asked, "input": conversation, "store": False})
    assert later.usage.input_tokens == whole.usage.input_tokens
    assert later.output_text == whole.output_text
