"""Which tool-call syntax a chat template speaks: found by rendering a probe call through the
template and reading what it writes (probe.py); the template source is searched for the markers
its models were trained to write only where the template cannot render the probe."""

from __future__ import annotations

import functools
from typing import Literal

from reame.chat_template import ChatTemplate
from reame.tool_calls.probe import ARGUMENT, FUNCTION, call_section, tools_section

ToolFamily = Literal["hermes", "llama3", "mistral", "qwen3_coder", "lfm2", "generic"]
FAMILIES: tuple[ToolFamily, ...] = ("hermes", "llama3", "mistral", "qwen3_coder", "lfm2", "generic")

# NOTE: the strings each family's calls are marked with; a caller passes to tool_grammar()
# those that are single special tokens of its model's vocabulary
MARKERS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>", "</tool_call>"),
    "llama3": ("<|python_tag|>",),
    "mistral": ("[TOOL_CALLS]",),
    "qwen3_coder": ("<tool_call>", "</tool_call>"),
    "lfm2": ("<|tool_call_start|>", "<|tool_call_end|>"),
    "generic": (),
}
_XML_CALL = f"<tool_call>\n<function={FUNCTION}>\n<parameter={ARGUMENT}>\n"
# NOTE: LFM2's templates drop an assistant's tool_calls (the calls are its text): such a
# template is known by the tool list it writes instead
_LFM2_TOOL_LISTS = ("<|tool_list_start|>", "List of tools: [")


@functools.lru_cache(maxsize=16)
def tool_family(template: ChatTemplate | str | None) -> ToolFamily:
    """The tool-call family of a chat template, given as its source or compiled (then, if it
    cannot render the probe, there is no source to search: "generic"); "generic" too when it
    knows nothing of tools. Kept per template: a request asks it again."""
    if not template:
        return "generic"
    source = template if isinstance(template, str) else ""
    try:
        compiled = ChatTemplate(template) if isinstance(template, str) else template
        return _rendered_family(compiled)
    except Exception:  # a template may fail in any way; its source still tells
        return _source_family(source)


def _rendered_family(template: ChatTemplate) -> ToolFamily:
    section = call_section(template)
    if _XML_CALL in section:
        return "qwen3_coder"
    if "<|tool_call_start|>" in section:
        return "lfm2"
    if "<tool_call>" in section:
        return "hermes"
    if "[TOOL_CALLS]" in section:
        return "mistral"
    if "<|python_tag|>" in section or (FUNCTION in section and '"parameters"' in section):
        return "llama3"
    if FUNCTION not in section and any(m in tools_section(template) for m in _LFM2_TOOL_LISTS):
        return "lfm2"
    return "generic"


def _source_family(src: str) -> ToolFamily:
    # NOTE: in llama.cpp's order: Hermes first, as a few Llama-derived templates carry both;
    # Qwen3-Coder's XML calls sit inside Hermes' <tool_call> markers, so they come before it
    if all(m in src for m in ("<tool_call>", "<function=", "<parameter=")):
        return "qwen3_coder"
    if "<|tool_call_start|>" in src or any(m in src for m in _LFM2_TOOL_LISTS):
        return "lfm2"
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
