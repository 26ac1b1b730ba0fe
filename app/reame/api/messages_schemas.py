"""Request bodies of Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`)
as Reame accepts them (pydantic; unknown fields are refused).

Fields the specification defines that Reame does not act on are accepted and ignored
(`cache_control`, on the request or any block or tool: Reame keeps every prefix it computes
anyway; `citations`; `metadata`; `service_tier`, `speed`, `inference_geo`, `diagnostics`,
`workspace_id`, `user_profile_id`; `container`; `context_management`; `mcp_servers` (none are
called); a tool's `strict` (its input always keeps to its schema here), `defer_loading`,
`allowed_callers`, `input_examples`, `eager_input_streaming`; a tool use's `caller` and
`toolset_name`; a thought's `display`; a thinking block's `signature` and `redacted_thinking`
blocks, which only Anthropic's servers can read). What Reame cannot serve is a clear 400
where it is converted (images and server tools: messages_convert.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from reame.api.schemas import Name, StopString

STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
Ignored = Any  # NOTE: a field the specification defines and Reame does not act on
MAX_STOP_SEQUENCES = 4  # as the chat route's stop strings


class CacheControl(BaseModel):
    model_config = STRICT
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextBlock(BaseModel):
    model_config = STRICT
    type: Literal["text"]
    text: StrictStr
    cache_control: CacheControl | None = None
    citations: Ignored | None = None


class MediaBlock(BaseModel):
    """An image or a document: only a document of plain text is served (as text)."""

    model_config = STRICT
    type: Literal["image", "document", "search_result", "container_upload"]
    source: Ignored | None = None
    cache_control: CacheControl | None = None
    title: Ignored | None = None
    context: Ignored | None = None
    citations: Ignored | None = None
    content: Ignored | None = None


class ToolUseBlock(BaseModel):
    model_config = STRICT
    type: Literal["tool_use"]
    id: str = Field(min_length=1, max_length=128)
    name: Name
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: Ignored | None = None
    toolset_name: Ignored | None = None


class ToolResultBlock(BaseModel):
    model_config = STRICT
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1, max_length=128)
    content: StrictStr | list[TextBlock | MediaBlock] | None = None
    is_error: StrictBool | None = None
    cache_control: CacheControl | None = None
    toolset_name: Ignored | None = None


class ThinkingBlock(BaseModel):
    model_config = STRICT
    type: Literal["thinking"]
    thinking: StrictStr
    signature: StrictStr | None = None


class RedactedThinkingBlock(BaseModel):
    model_config = STRICT
    type: Literal["redacted_thinking"]
    data: StrictStr


class ServerToolBlock(BaseModel):
    """Blocks of Anthropic's own server tools (web search, code execution...): refused."""

    model_config = ConfigDict(extra="allow")
    type: Literal[
        "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
        "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    ]  # fmt: skip


Block = Annotated[
    TextBlock
    | MediaBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ServerToolBlock,
    Field(discriminator="type"),
]


class Message(BaseModel):
    model_config = STRICT
    role: Literal["user", "assistant"]
    content: StrictStr | list[Block]


class CustomTool(BaseModel):
    model_config = STRICT
    type: Literal["custom"] | None = None
    name: Name
    description: StrictStr | None = None
    input_schema: dict[str, Any]
    cache_control: CacheControl | None = None
    strict: StrictBool | None = None  # NOTE: a tool's input is always held to its schema here
    allowed_callers: Ignored | None = None
    defer_loading: Ignored | None = None
    eager_input_streaming: Ignored | None = None
    input_examples: Ignored | None = None


class ToolChoice(BaseModel):
    model_config = STRICT
    type: Literal["auto", "any", "tool", "none"]
    name: Name | None = None
    disable_parallel_tool_use: StrictBool | None = None


class ThinkingEnabled(BaseModel):
    model_config = STRICT
    type: Literal["enabled"]
    budget_tokens: StrictInt = Field(ge=0)
    display: Literal["summarized", "omitted"] | None = None


class ThinkingOff(BaseModel):
    """`disabled`: no thought; `adaptive` and `between_tools`: as the model and server decide."""

    model_config = STRICT
    type: Literal["disabled", "adaptive", "between_tools"]
    display: Literal["summarized", "omitted"] | None = None


Thinking = Annotated[ThinkingEnabled | ThinkingOff, Field(discriminator="type")]


class JsonOutputFormat(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(BaseModel):
    model_config = STRICT
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JsonOutputFormat | None = None


class _Input(BaseModel):
    """What a prompt is made of: the fields count_tokens takes too."""

    model_config = STRICT
    model: str = Field(min_length=1)
    messages: Annotated[list[Message], Field(min_length=1)]
    system: StrictStr | list[TextBlock] | None = None
    tools: Annotated[list[CustomTool], Field(max_length=128)] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    mcp_servers: Ignored | None = None
    context_management: Ignored | None = None
    cache_control: CacheControl | None = None


class CountTokensRequest(_Input):
    pass


class MessagesRequest(_Input):
    max_tokens: StrictInt = Field(ge=0)  # 0: the prompt computed and kept, nothing written
    stop_sequences: Annotated[list[StopString], Field(max_length=MAX_STOP_SEQUENCES)] | None = None
    stream: StrictBool = False
    metadata: Ignored | None = None
    # NOTE: the current specification no longer lists these three; earlier clients send them
    temperature: StrictFloat | None = Field(None, ge=0.0, le=1.0)
    top_p: StrictFloat | None = Field(None, gt=0.0, le=1.0)
    top_k: StrictInt | None = Field(None, ge=0)
    service_tier: Literal["auto", "standard_only"] | None = None
    container: Ignored | None = None
    diagnostics: Ignored | None = None
    inference_geo: Ignored | None = None
    speed: Literal["standard", "fast"] | None = None
    user_profile_id: Ignored | None = None
    workspace_id: Ignored | None = None
