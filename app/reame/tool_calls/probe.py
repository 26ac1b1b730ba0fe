"""What a chat template writes for a tool call, found by rendering it (as llama.cpp's
chat-diff-analyzer does): one conversation ends with a plain reply, the other with a call of a
probe function, and what differs between the two prompts is the template's own call syntax."""

from __future__ import annotations

from reame.chat_template import ChatTemplate

FUNCTION, ARGUMENT, VALUE = "FFF_FIRST_FUN_F", "AA_ARG_FST_AA", "XXXX"
# NOTE: nine letters and digits: Mistral's templates refuse any other call id
CALL_ID = "call00001"
_USER = {"role": "user", "content": "U_USER_MSG Hello END_U"}
_REPLY = {"role": "assistant", "content": "A_ASST_MSG I can help END_A"}
_CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "id": CALL_ID,
            "type": "function",
            "function": {"name": FUNCTION, "arguments": {ARGUMENT: VALUE}},
        }
    ],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": FUNCTION,
            "description": "Test function foo",
            "parameters": {
                "type": "object",
                "properties": {ARGUMENT: {"type": "string", "description": "First argument"}},
                "required": [ARGUMENT],
            },
        },
    }
]


def call_section(template: ChatTemplate) -> str:
    """The text a template writes for an assistant turn of one call, where its plain reply would
    be. Raises whatever the template raises."""
    plain = template.render([_USER, _REPLY], add_generation_prompt=False, tools=TOOLS)
    called = template.render([_USER, _CALL], add_generation_prompt=False, tools=TOOLS)
    return _differing(plain, called)


def tools_section(template: ChatTemplate) -> str:
    """The text a template adds to a prompt for the tools it is given."""
    bare = template.render([_USER], add_generation_prompt=True)
    told = template.render([_USER], add_generation_prompt=True, tools=TOOLS)
    return _differing(bare, told)


def _differing(left: str, right: str) -> str:
    """`right` less the start and the end it shares with `left`."""
    start = 0
    while start < min(len(left), len(right)) and left[start] == right[start]:
        start += 1
    end = 0
    while end < min(len(left), len(right)) - start and left[-1 - end] == right[-1 - end]:
        end += 1
    return right[start : len(right) - end]
