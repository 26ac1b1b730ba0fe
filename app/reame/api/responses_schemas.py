"""Request bodies of OpenAI's Responses API (`POST /v1/responses`) as Reame accepts them
(pydantic; unknown fields are refused).

Fields the specification defines that Reame does not act on are accepted and ignored: on the
request `include`, `metadata`, `truncation` (a prompt past the context is a 400 either way),
`user`, `safety_identifier`, `service_tier`, `prompt_cache_key`, `prompt_cache_retention`,
`prompt_cache_options` (Reame keeps every prefix it computes anyway), `max_tool_calls` (one turn
makes one set of calls here), `top_logprobs`, `stream_options`, `background` (false only),
`context_management`, `moderation`, `access_programs`; `text.verbosity`; `reasoning.summary` and
`generate_summary` (the thought itself comes back, not a summary); a function tool's `strict`
(its arguments always keep to its schema here); an item's `id` and `status`; a reasoning item's
`encrypted_content`; a text part's `annotations` and `logprobs`. What Reame cannot serve (images,
files, built-in tools, `conversation`, `prompt`, item references) is a clear 400 where it is
converted (responses_convert.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
)

from reame.api.schemas import Name

STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
Ignored = Any  # NOTE: a field the specification defines and Reame does not act on
ItemId = Annotated[str, Field(min_length=1, max_length=128)]
ResponseId = Annotated[str, Field(min_length=1, max_length=128)]


class ContentText(BaseModel):
    """input_text (what the user or the system said), output_text (what the assistant said,
    sent back) and refusal."""

    model_config = STRICT
    type: Literal["input_text", "output_text", "refusal"]
    text: StrictStr | None = None
    refusal: StrictStr | None = None
    annotations: Ignored | None = None
    logprobs: Ignored | None = None


class ContentMedia(BaseModel):
    """input_image, input_file, input_audio: refused where converted (a text model)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["input_image", "input_file", "input_audio"]


Part = Annotated[ContentText | ContentMedia, Field(discriminator="type")]


class MessageItem(BaseModel):
    model_config = STRICT
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[Part]
    id: ItemId | None = None
    status: Ignored | None = None
    phase: Ignored | None = None


class FunctionCallItem(BaseModel):
    model_config = STRICT
    type: Literal["function_call"]
    call_id: ItemId
    name: Name
    arguments: str = Field(max_length=256 * 1024)
    id: ItemId | None = None
    status: Ignored | None = None
    namespace: Ignored | None = None


class FunctionCallOutputItem(BaseModel):
    model_config = STRICT
    type: Literal["function_call_output"]
    call_id: ItemId
    output: StrictStr | list[Part]
    id: ItemId | None = None
    status: Ignored | None = None


class ReasoningPart(BaseModel):
    model_config = STRICT
    type: Literal["summary_text", "reasoning_text"]
    text: StrictStr


class ReasoningItem(BaseModel):
    model_config = STRICT
    type: Literal["reasoning"]
    summary: list[ReasoningPart] = Field(default_factory=list)
    content: list[ReasoningPart] | None = None
    encrypted_content: Ignored | None = None
    id: ItemId | None = None
    status: Ignored | None = None


class UnservedItem(BaseModel):
    """Items of tools Reame does not run (built-in tools, item references): refused."""

    model_config = ConfigDict(extra="allow")
    type: Literal[
        "item_reference", "file_search_call", "web_search_call", "computer_call",
        "computer_call_output", "image_generation_call", "code_interpreter_call",
        "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
        "apply_patch_call", "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request",
        "mcp_approval_response", "mcp_call", "custom_tool_call", "custom_tool_call_output",
        "compaction",
    ]  # fmt: skip


_SERVED_ITEMS = ("message", "function_call", "function_call_output", "reasoning")


def _item_type(value: object) -> str:
    """An input item without a type is a message (OpenAI's EasyInputMessage); what is no
    object at all is refused as an unserved item is (a 400, not a 500: schemathesis sent a
    list)."""
    kind = value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _SERVED_ITEMS else "unserved"


Item = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[UnservedItem, Tag("unserved")],
    Discriminator(_item_type),
]


class ResponsesFunctionTool(BaseModel):
    model_config = STRICT
    type: Literal["function"]
    name: Name
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None  # NOTE: arguments always keep to the schema here
    defer_loading: Ignored | None = None


def _not_function(kind: str) -> str:
    if kind == "function":
        raise ValueError("a function tool is checked as one")
    return kind


class ResponsesBuiltInTool(BaseModel):
    """OpenAI's own tools (web search, file search, code interpreter...): refused."""

    model_config = ConfigDict(extra="allow")
    type: Annotated[StrictStr, AfterValidator(_not_function)]


class ChoiceOfFunction(BaseModel):
    model_config = STRICT
    type: Literal["function"]
    name: Name


class FormatText(BaseModel):
    model_config = STRICT
    type: Literal["text"]


class FormatJsonObject(BaseModel):
    model_config = STRICT
    type: Literal["json_object"]


class FormatJsonSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["json_schema"]
    name: Name
    schema_: dict[str, Any] = Field(alias="schema")
    description: StrictStr | None = None
    strict: StrictBool | None = None


class ResponsesTextConfig(BaseModel):
    model_config = STRICT
    format: (
        Annotated[FormatText | FormatJsonObject | FormatJsonSchema, Field(discriminator="type")]
        | None
    ) = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningConfig(BaseModel):
    model_config = STRICT
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class ResponsesRequest(BaseModel):
    model_config = STRICT
    model: str = Field(min_length=1)
    input: StrictStr | Annotated[list[Item], Field(max_length=4096)]
    instructions: StrictStr | None = None
    tools: (
        Annotated[list[ResponsesFunctionTool | ResponsesBuiltInTool], Field(max_length=128)] | None
    ) = None
    tool_choice: Literal["none", "auto", "required"] | ChoiceOfFunction | None = None
    parallel_tool_calls: StrictBool | None = None
    text: ResponsesTextConfig | None = None
    reasoning: ReasoningConfig | None = None
    max_output_tokens: StrictInt | None = Field(None, ge=1)
    temperature: StrictFloat | None = Field(None, ge=0.0, le=2.0)
    top_p: StrictFloat | None = Field(None, gt=0.0, le=1.0)
    store: StrictBool | None = None
    previous_response_id: ResponseId | None = None
    stream: StrictBool | None = None
    # Reame's own knobs, as on chats
    top_k: StrictInt | None = Field(None, ge=0)
    seed: StrictInt | None = Field(None, ge=0, lt=2**63)
    # accepted and ignored (the module's docstring says why)
    include: Ignored | None = None
    metadata: dict[str, str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: StrictStr | None = None
    safety_identifier: StrictStr | None = None
    service_tier: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    prompt_cache_retention: StrictStr | None = None
    prompt_cache_options: Ignored | None = None
    max_tool_calls: StrictInt | None = Field(None, ge=1)
    top_logprobs: StrictInt | None = Field(None, ge=0, le=20)
    stream_options: Ignored | None = None
    background: Literal[False] | None = None
    context_management: Ignored | None = None
    moderation: Ignored | None = None
    access_programs: Ignored | None = None
    # defined, not served: a 400 where converted
    conversation: Ignored | None = None
    prompt: Ignored | None = None
