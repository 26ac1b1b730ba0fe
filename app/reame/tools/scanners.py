"""The reader of a family's answers: the JSON families' Scanner, or one of the marked ones."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from reame.tools.events import Event
from reame.tools.pythonic_calls import PythonicScanner
from reame.tools.scan import Scanner
from reame.tools.xml_calls import XmlScanner


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
