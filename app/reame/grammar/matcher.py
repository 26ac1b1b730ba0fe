"""Constrained decoding: the one module that uses llguidance.

A grammar (a JSON schema, any JSON object, Lark or GBNF text, a regex) is compiled once per text
and kept; each request gets its own matcher, a copy of the compiled one. Per token the matcher
gives the set of allowed tokens (a mask the sampler applies before anything else), consumes the
token picked, and says which tokens the grammar forces next: those are known, not sampled, and
go into the next llama_decode together.

JSON is compiled without free whitespace between tokens: a small model would otherwise pad an
answer with newlines up to max_tokens (ollama#4370, llguidance#267).
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import llguidance
import llguidance.llamacpp
import numpy as np
from llguidance import LLMatcher, LLTokenizer

from reame import metrics
from reame.errors import InvalidRequestError
from reame.grammar.closed_objects import closed_objects

# "grammar": Lark or GBNF, told apart by llguidance
GrammarKind = Literal["json_schema", "json_object", "lark", "gbnf", "grammar", "regex"]
_JSON_OPTIONS = {"whitespace_flexible": False}
_COMPILED_KEPT = 128


@dataclass(slots=True, frozen=True)
class GrammarSpec:
    """What a request asks its output to match. `text`: the schema (JSON text), the grammar or
    the regex; `param`: the request field it came from, for errors."""

    kind: GrammarKind
    text: str = ""
    param: str = "response_format"

    @staticmethod
    def json_schema(schema: dict[str, Any], param: str = "response_format") -> GrammarSpec:
        return GrammarSpec("json_schema", json.dumps(closed_objects(schema)), param)


def _source(spec: GrammarSpec) -> str:
    """llguidance's grammar text for a spec; ValueError if it cannot even be read."""
    if spec.kind == "json_object":
        return LLMatcher.grammar_from_json_schema({"type": "object"}, overrides=_JSON_OPTIONS)
    if spec.kind == "json_schema":
        return LLMatcher.grammar_from_json_schema(spec.text, overrides=_JSON_OPTIONS)
    if spec.kind == "regex":
        return LLMatcher.grammar_from_regex(spec.text)
    return llguidance.grammar_from(spec.kind, spec.text)


class Grammar:
    """A compiled grammar: hands out matchers in its start state."""

    def __init__(self, matcher: LLMatcher, vocab_size: int) -> None:
        self._pristine, self._vocab_size = matcher, vocab_size

    def matcher(self) -> Constraint:
        return Constraint(self._pristine.deep_copy(), self._vocab_size)


class Constraint:
    """One sequence's place in its grammar."""

    def __init__(self, matcher: LLMatcher, vocab_size: int) -> None:
        self._m, self._vocab_size = matcher, vocab_size
        self._bits = np.zeros((vocab_size + 31) // 32, dtype=np.int32)

    def allowed(self) -> np.ndarray:
        """The tokens that may come next, as a boolean mask over the vocabulary."""
        started = time.perf_counter()
        self._m.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        mask = np.unpackbits(self._bits.view(np.uint8), bitorder="little")[: self._vocab_size]
        metrics.GRAMMAR_MASK_SECONDS.observe(time.perf_counter() - started)
        return mask.astype(bool)

    def consume(self, tokens: Sequence[int]) -> bool:
        return self._m.consume_tokens(list(tokens))

    def forced(self) -> list[int]:
        """The tokens the grammar allows no choice about next (may be none)."""
        return self._m.compute_ff_tokens()

    def valid_prefix(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of a draft the grammar accepts from here."""
        return self._m.validate_tokens(list(tokens)) if tokens else 0

    @property
    def is_finished(self) -> bool:
        """Nothing more can follow (the answer is complete, or the matcher failed)."""
        return self._m.is_stopped()

    @property
    def error(self) -> str:
        return self._m.get_error()

    def copy(self) -> Constraint:
        return Constraint(self._m.deep_copy(), self._vocab_size)


class Grammars:
    """The grammars of one model: its llguidance tokenizer (built once, from the model's own
    vocabulary) and the grammars compiled so far, kept by their text."""

    def __init__(self, vocab: object, vocab_size: int, end_ids: Sequence[int]) -> None:
        with warnings.catch_warnings():
            # NOTE: llguidance reads each token's attributes through a function llama-cpp-python
            # marks deprecated: a warning per token of the vocabulary
            warnings.simplefilter("ignore", DeprecationWarning)
            self._tokenizer: LLTokenizer = llguidance.llamacpp.lltokenizer_from_vocab(
                vocab, eos_token=list(end_ids)
            )
        self._vocab_size = vocab_size
        self._compiled: OrderedDict[GrammarSpec, Grammar] = OrderedDict()
        self._lock = threading.Lock()

    def compile(self, spec: GrammarSpec) -> Grammar:
        """The compiled grammar of a spec; InvalidRequestError saying why if it does not
        compile (never an unconstrained answer instead). Call it off the event loop."""
        with self._lock:
            grammar = self._compiled.get(spec)
            if grammar is not None:
                self._compiled.move_to_end(spec)
                return grammar
        try:
            source = _source(spec)
        except (ValueError, TypeError) as exc:
            raise InvalidRequestError(f"{spec.param}: {exc}", param=spec.param) from exc
        matcher = LLMatcher(self._tokenizer, source, log_level=0)
        if matcher.is_error():
            why = matcher.get_error().strip().splitlines()[0]
            raise InvalidRequestError(
                f"{spec.param}: the {spec.kind.replace('_', ' ')} does not compile: {why}",
                param=spec.param,
            )
        grammar = Grammar(matcher, self._vocab_size)
        with self._lock:
            self._compiled[spec] = grammar
            while len(self._compiled) > _COMPILED_KEPT:
                self._compiled.popitem(last=False)
        return grammar

    def tokenize(self, text: str) -> list[int]:
        return self._tokenizer.tokenize_str(text)
