"""How a chat template writes a model's thought, found by rendering probe conversations and
comparing them (as llama.cpp's template analyser does), never by the template's name. Pure.

Four renderings answer everything Reame needs:
- an assistant turn with a probe thought as the last turn: the markers around the thought and
  what the template writes between the thought and the answer (Qwen3: "\\n</think>\\n\\n");
- the generation prompt with thinking on and off (`enable_thinking`), and with two effort
  levels (`reasoning_effort`): which switches the template reads; where the probe thought is
  not rendered at all (DeepSeek-R1's distills), the markers are found in that difference;
- the same assistant turn followed by another user message: whether an earlier turn keeps its
  thought in the history, or the template drops it (then the next prompt leaves the state
  kept after the thought, and Reame computes the history's form ahead).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from reame.chat_template import ChatTemplate
from reame.errors import InvalidRequestError

USER = "U_USER_PROBE hello END_U"
USER_TWO = "V_USER_PROBE again END_V"
ANSWER = "A_ANSWER_PROBE I can help END_A"
THOUGHT = "R_THOUGHT_PROBE I am thinking END_R"
# what a marker looks like: <think>, <|channel|>, [THINK]
_SWITCHES = (("enable_thinking", (True, False)), ("reasoning_effort", ("low", "high")))
_MARKER = re.compile(r"<[^<>\s]{1,40}>|\[[A-Z_]{2,40}\]")


@dataclass(slots=True, frozen=True)
class ThinkingSyntax:
    open: str  # "<think>"
    close: str  # "</think>"
    close_run: str  # from the thought's end to the answer, as the template writes it
    open_run: str  # from the assistant header to the thought, as the template writes it
    switches: frozenset[str]  # template variables that change the generation prompt
    drops_history: bool  # an earlier turn is rendered without its thought

    @property
    def empty_thought(self) -> str:
        """A closed empty thought: what a template without a switch gets to think not at all."""
        return self.open_run + self.close_run.lstrip()


def analyse(template: ChatTemplate) -> ThinkingSyntax | None:
    """The template's thinking syntax; None when its model does not think (no probe finds
    markers)."""
    switches = frozenset(name for name, values in _SWITCHES if _differs(template, name, values))
    found = _from_thought(template) or _from_switch(template)
    if found is None:
        return None
    open_, close, open_run, close_run = found
    history = _render(
        template,
        [_user(USER), _assistant(), _user(USER_TWO)],
        add_generation_prompt=False,
    )
    drops = history is not None and ANSWER in history and THOUGHT not in history
    return ThinkingSyntax(open_, close, close_run, open_run, switches, drops)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant() -> dict[str, Any]:
    return {"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT}


def _render(template: ChatTemplate, messages: list[dict], **kwargs: Any) -> str | None:
    add = kwargs.pop("add_generation_prompt", True)
    try:
        return template.render(messages, add, None, kwargs)
    except InvalidRequestError:
        return None


def _differs(template: ChatTemplate, name: str, values: tuple[Any, Any]) -> bool:
    a, b = (_render(template, [_user(USER)], **{name: v}) for v in values)
    return a is not None and b is not None and a != b


def _markers(text: str) -> list[str]:
    return _MARKER.findall(text)


def _from_thought(template: ChatTemplate) -> tuple[str, str, str, str] | None:
    """Markers around a probe thought rendered as the last turn's."""
    text = _render(template, [_user(USER), _assistant()], add_generation_prompt=False)
    if text is None or THOUGHT not in text or ANSWER not in text:
        return None
    at, answer_at = text.index(THOUGHT), text.index(ANSWER)
    before, between = text[:at], text[at + len(THOUGHT) : answer_at]
    user_end = text.find(USER) + len(USER)
    opens, closes = _markers(before[user_end:]), _markers(between)
    if not opens or not closes:
        return None
    open_ = opens[-1]
    return open_, closes[0], before[before.rfind(open_) :], between


def _from_switch(template: ChatTemplate) -> tuple[str, str, str, str] | None:
    """Markers in the difference of the generation prompt with thinking on and off: off
    closes the thought the prompt opens (DeepSeek-R1's distills), or adds an empty one."""
    on = _render(template, [_user(USER)], enable_thinking=True)
    off = _render(template, [_user(USER)], enable_thinking=False)
    if on is None or off is None or on == off:
        return None
    common = len(os.path.commonprefix([on, off]))
    tail_on, tail_off = on[common:], off[common:]
    if not tail_on.strip() and off.startswith(on):
        opens = _markers(on[-64:])
        closes = _markers(tail_off)
        if opens and closes:
            open_run = on[on.rfind(opens[-1]) :]
            return opens[-1], closes[0], open_run, "\n" + tail_off.lstrip() + "\n\n"
    pair = _markers(tail_off)
    if not tail_on.strip() and len(pair) == 2:
        at = tail_off.index(pair[1])
        return pair[0], pair[1], tail_off[:at].rstrip() + "\n", "\n" + tail_off[at:]
    return None
