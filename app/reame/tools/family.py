"""Which tool-call syntax a chat template speaks, found as llama.cpp finds it: by searching
the template source for the markers its models were trained to write."""

from __future__ import annotations

from typing import Literal

ToolFamily = Literal["hermes", "llama3", "mistral", "generic"]
FAMILIES: tuple[ToolFamily, ...] = ("hermes", "llama3", "mistral", "generic")

# NOTE: the strings each family's calls are marked with; a caller passes to tool_grammar()
# those that are single special tokens of its model's vocabulary
MARKERS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>", "</tool_call>"),
    "llama3": ("<|python_tag|>",),
    "mistral": ("[TOOL_CALLS]",),
    "generic": (),
}


def tool_family(template_source: str | None) -> ToolFamily:
    """The tool-call family of a chat template; "generic" when it knows nothing of tools."""
    src = template_source or ""
    # NOTE: in llama.cpp's order: Hermes first, as a few Llama-derived templates carry both
    if "<tool_call>" in src:
        return "hermes"
    if "<|python_tag|>" in src or _has_ipython_tools(src):
        return "llama3"
    if "[TOOL_CALLS]" in src:
        return "mistral"
    return "generic"


def _has_ipython_tools(src: str) -> bool:
    """Llama 3.2/3.3 templates: tool results go to an `ipython` turn, calls are written as
    {"name": ..., "parameters": ...} (3.1 also names <|python_tag|>)."""
    return "<|start_header_id|>ipython<|end_header_id|>" in src or (
        "ipython" in src and '"parameters"' in src
    )
