"""The reader of a family's answers: the JSON families' Scanner, or one of the marked ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from reame.tool_calls.events import Event
from reame.tool_calls.pythonic_calls import PythonicScanner
from reame.tool_calls.scan import Scanner
from reame.tool_calls.xml_calls import XmlScanner


class Reader(Protocol):
    def feed(self, text: str) -> list[Event]: ...

    def finish(self) -> list[Event]: ...


def new_scanner(family: str, tools: Sequence[dict[str, Any]] | None = None) -> Reader:
    """`tools`: the request's, whose parameter schemas type the XML family's raw values."""
    if family == "qwen3_coder":
        return XmlScanner(tools)
    if family == "lfm2":
        return PythonicScanner()
    return Scanner(family)
