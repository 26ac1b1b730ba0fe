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
