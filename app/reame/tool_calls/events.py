"""What reading an answer finds, in the order it finds it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Opened:
    """A call whose name is now known."""

    name: str


@dataclass(frozen=True, slots=True)
class Arguments:
    fragment: str


@dataclass(frozen=True, slots=True)
class Closed:
    """The opened call is whole and well-formed."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The opened call turned out malformed: its text, which is content after all."""

    raw: str


Event = Text | Opened | Arguments | Closed | Failed
