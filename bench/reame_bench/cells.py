"""How a bench figure is printed in a table cell."""

from __future__ import annotations


def cell(value: float | None, is_ratio: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if is_ratio else f"{value:.3f}" if value < 10 else f"{value:.1f}"
