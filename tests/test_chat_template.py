from __future__ import annotations

import pytest

from reame.chat_template import ChatTemplate, require_template
from reame.errors import InvalidRequestError

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_messages_render_with_the_generation_prompt() -> None:
    t = ChatTemplate(TEMPLATE, bos_token="<s>")
    out = t.render([{"role": "user", "content": "hi"}])
    assert out == "<s><user>hi</s><assistant>"


def test_a_template_that_raises_gives_a_clear_error() -> None:
    t = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(InvalidRequestError, match="roles must alternate"):
        t.render([{"role": "user", "content": "hi"}])


def test_a_model_without_a_template_is_a_clear_error() -> None:
    with pytest.raises(InvalidRequestError, match="has no chat template"):
        require_template(None, "gemma")


TOOLS_TEMPLATE = (
    "{% if tools is defined %}{% for t in tools %}{{ t['function']['name'] }};{% endfor %}"
    "{% else %}no tools{% endif %}"
)


def test_tools_reach_the_template_only_when_there_are_some() -> None:
    t = ChatTemplate(TOOLS_TEMPLATE)
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    assert t.render([], tools=tools) == "get_weather;"
    assert t.render([], tools=None) == "no tools"
    assert t.render([], tools=[]) == "no tools"


def test_tojson_is_hugging_faces_plain_json_dumps() -> None:
    source = (
        "{% set x = {'a': \"<è&'>\"} %}{% set y = {'b': 1, 'a': 2} %}"
        "{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ y | tojson(sort_keys=true) }}"
    )
    assert (
        ChatTemplate(source).render([]) == '{"a": "<è&\'>"}|{\n  "a": "<è&\'>"\n}|{"a": 2, "b": 1}'
    )


def test_tojson_takes_separators() -> None:
    t = ChatTemplate("{{ messages | tojson(separators=(',', ':')) }}")
    assert t.render([{"role": "user", "content": "hi"}]) == '[{"role":"user","content":"hi"}]'


def test_loop_controls_work_as_in_hugging_face() -> None:
    source = (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{{ m.content }}{% endfor %}"
    )
    t = ChatTemplate(source)
    assert t.render([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]) == "u"
