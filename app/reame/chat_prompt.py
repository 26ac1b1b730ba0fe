"""A chat prompt as the model in force takes it: the chat template rendered and tokenized, and
what prefix reuse needs to know of it (where its shared parts end, where a question over
passages starts, what follows an answer, how a thought is written).

Apart from running jobs (service.py): all of it is the template's and the tokenizer's, and is
decided before a request reaches the engine.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reame.chat_template import ChatTemplate, require_template
from reame.engine.request import ThoughtSpec
from reame.errors import InvalidRequestError
from reame.llama.model import Model
from reame.saved_state import common_length
from reame.segment_tokenizer import SegmentTokenizer, marker_candidates
from reame.thinking.framing import PromptEnd
from reame.thinking.syntax import ThinkingSyntax, analyse

# NOTE: a probe text no conversation holds: where a continued answer's content goes
_CONTINUED = "reameContinuedAnswer"


class ChatPrompts:
    def __init__(
        self,
        model: Model,
        template_source: str | None,
        min_tokens: int | None = None,
        warm_ahead: bool = True,
    ) -> None:
        """`template_source`: the chat template in force (None: the model has none);
        `min_tokens`: the shortest prefix the prefix cache stores, None when it is off (no
        marks then); `warm_ahead`: whether a turn's closing is computed ahead."""
        self.model = model
        self.template_source = template_source
        self._warm_ahead = warm_ahead
        self._min_tokens = min_tokens
        self._tools_made: tuple[ChatTemplate, SegmentTokenizer] | None = None
        self._closing: tuple[int, ...] | None = None  # closing's, once known

    @property
    def warms_ahead(self) -> bool:
        return self._warm_ahead

    def prompt(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: list[dict] | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> list[int]:
        return self.tokens(messages, add_generation_prompt=True, tools=tools, kwargs=kwargs)

    def text(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: list[dict] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The rendered prompt as text (its thinking framing is decided on it)."""
        template, _ = self._tools()
        return template.render(messages, add_generation_prompt, tools, kwargs)

    def continued_text(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: list[dict] | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt of a chat whose last message, the assistant's, is the start of the
        answer (Anthropic's prefill, vLLM's continue_final_message): rendered as the template
        writes that message, up to where its content ends, with no end of turn after it."""
        *before, last = messages
        probed = [*before, {**last, "content": _CONTINUED}]
        text = self.text(probed, tools, kwargs, add_generation_prompt=False)
        at = text.find(_CONTINUED)
        if at < 0:
            raise InvalidRequestError(
                "this model's chat template does not write the last assistant message's "
                "content as sent: it cannot be continued",
                "messages",
            )
        return text[:at] + (last.get("content") or "")

    def tokenize(self, text: str) -> list[int]:
        _, tokenize = self._tools()
        return self._one_bos(tokenize(text))

    def tokens(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool,
        tools: list[dict] | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> list[int]:
        template, tokenize = self._tools()
        return self._one_bos(
            tokenize(template.render(messages, add_generation_prompt, tools, kwargs))
        )

    @functools.cached_property
    def thinking(self) -> ThinkingSyntax | None:
        """How the template in force writes a thought (probed once); None: its model does not
        think, or there is no template."""
        if not self.template_source:
            return None
        template, _ = self._tools()
        return analyse(template)

    @functools.cached_property
    def _thought_base(self) -> ThoughtSpec | None:
        """The template's thought in this model's tokens (tokenized once): markers that are one
        token, the closing run the engine writes."""
        syntax = self.thinking
        if syntax is None:
            return None
        markers = []
        for text in (syntax.open, syntax.close):
            ids = self.model.tokenize(text, add_special=False)
            if len(ids) == 1:
                markers.append((ids[0], text))
        close = tuple(self.model.tokenize(syntax.close_run, add_special=False))
        return ThoughtSpec(syntax.open, syntax.close, close, False, None, tuple(markers))

    def thought_spec(self, end: PromptEnd, budget: int | None) -> ThoughtSpec | None:
        """What the engine needs to tell a thought apart, close it and bound it, for a prompt
        that ends `end`; None when no thought can come (a closed one, or no thinking)."""
        base = self._thought_base
        if base is None or end is PromptEnd.CLOSED:
            return None
        return replace(base, is_open=end is PromptEnd.OPEN, budget=budget)

    def marks(
        self,
        messages: Sequence[Mapping[str, Any]],
        prompt: list[int],
        tools: list[dict] | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[int, ...]:
        """Prompt lengths where a conversation's shared parts end: after the first message (a
        system prompt) and after the last earlier one, each taken up to the next message's
        role header (`<|im_start|>user` and the like, which every request of that kind shares
        too: 3 tokens less to compute on SmolLM2). Only with a prefix cache."""
        if self._min_tokens is None or len(messages) < 2:
            return ()
        marks = []
        for count in sorted({1, len(messages) - 1}):
            # NOTE: the next message as it is but empty (a tool result keeps the call it
            # answers: Mistral's template refuses one without)
            following = {k: v for k, v in messages[count].items() if k != "tool_calls"}
            upto = (*messages[:count], {**following, "content": ""})
            try:
                # NOTE: the heads' long pieces (a system prompt) come from the tokenizer's memory
                head = self.tokens(upto, add_generation_prompt=False, tools=tools, kwargs=kwargs)
            except InvalidRequestError:  # a template that takes no such head: no mark there
                continue
            marks.append(common_length(head, prompt))
        return tuple(m for m in marks if m > 0)

    def closing(self) -> tuple[int, ...]:
        """The template's tokens between an assistant's answer and the next user message's
        text (its end of turn, the next user header), which warm-ahead computes before the
        next turn comes; () when warm-ahead is off or the template does not show them."""
        if not self._warm_ahead:
            return ()
        if self._closing is None:
            template, _ = self._tools()
            answer, question = "reameWarmAnswer", "reameWarmQuestion"
            turns = [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
                {"role": "user", "content": question},
            ]
            text = template.render(turns, False, None)
            start = text.find(answer) + len(answer)
            end = text.find(question, start)
            between = text[start:end] if start >= len(answer) and end > start else ""
            self._closing = tuple(self.model.tokenize(between, False)) if between else ()
        return self._closing

    def _one_bos(self, tokens: list[int]) -> list[int]:
        # a template that writes the BOS itself must not get a second one from the tokenizer
        if len(tokens) > 1 and tokens[0] == tokens[1] == self.model.bos_id:
            tokens = tokens[1:]
        return tokens

    def _tools(self) -> tuple[ChatTemplate, SegmentTokenizer]:
        """The template compiled and its tokenizer (which keeps the tokens of long pieces),
        made at first use: a model without a template serves plain prompts."""
        if self._tools_made is None:
            source = require_template(self.template_source, self.model.name)
            template = ChatTemplate(
                source,
                self.model.token_text(self.model.bos_id),
                self.model.token_text(self.model.eos_id),
            )
            markers = [] if self.model.adds_eos else marker_candidates(source)
            splitting = [m for m in markers if self.model.is_splitting_token(m)]
            self._tools_made = (template, SegmentTokenizer(self.model.tokenize, splitting))
        return self._tools_made
