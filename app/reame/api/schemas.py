"""Request bodies of the OpenAI API as Reame accepts them (pydantic; unknown fields are refused).

Reame's own knobs are extra fields, documented in the README: top_k, min_p, repetition_penalty,
ignore_eos, speculation, session_id, the Conclave's best_of (on chats too), vote_on and
vote_early_stop, grammar (Lark or GBNF text, or a regex, on chats and completions), and
answer_memory (false: computed again, whatever the answer memory holds).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

# NOTE: caps on what one request can make the engine thread do for every token it writes
StopString = Annotated[str, Field(min_length=1, max_length=256)]
MAX_STOP_STRINGS = 4  # as OpenAI
TokenId = Annotated[str, Field(pattern=r"^[0-9]{1,10}$")]  # [0-9]: isdigit() takes "²"
# NOTE: strict: `true` is no token id (pydantic would take it as 1)
TokenIdValue = Annotated[StrictInt, Field(ge=0)]
Bias = Annotated[StrictFloat, Field(ge=-100.0, le=100.0)]
LogitBias = Annotated[
    dict[TokenId, Bias],
    Field(max_length=300, json_schema_extra={"additionalProperties": False}),  # as OpenAI
]
# NaN and infinities (Python's JSON reads them) pass no range check, so none are taken
STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
# a function's or a schema's name, as OpenAI allows it
Name = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
GrammarText = Annotated[str, Field(min_length=1, max_length=64 * 1024)]
# what a template variable may be set to by a request: no objects, no lists
PlainValue = (
    StrictBool | StrictInt | StrictFloat | Annotated[StrictStr, Field(max_length=4096)] | None
)


class ToolCallFunction(BaseModel):
    model_config = STRICT
    name: Name
    arguments: str = Field(max_length=256 * 1024)


class ToolCall(BaseModel):
    model_config = STRICT
    id: str = Field(min_length=1, max_length=128)
    type: Literal["function"] = "function"
    function: ToolCallFunction


class FunctionDefinition(BaseModel):
    model_config = STRICT
    name: Name
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class Tool(BaseModel):
    model_config = STRICT
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(BaseModel):
    model_config = STRICT
    name: Name


class NamedToolChoice(BaseModel):
    model_config = STRICT
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: Name
    description: str | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: StrictBool | None = None


class TextFormat(BaseModel):
    model_config = STRICT
    type: Literal["text"]


class JsonObjectFormat(BaseModel):
    """`schema`: llama-server's form of a JSON schema (instructor's JSON_SCHEMA mode sends it)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)
    type: Literal["json_object"]
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class JsonSchemaResponseFormat(BaseModel):
    model_config = STRICT
    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaResponseFormat, Field(discriminator="type")
]


class GrammarRule(BaseModel):
    """Reame's `grammar` as an object: which language the text is in."""

    model_config = STRICT
    type: Literal["lark", "gbnf", "regex"]
    value: GrammarText


class TextPart(BaseModel):
    model_config = STRICT
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = STRICT
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = Field(None, min_length=1, max_length=128)
    # NOTE: what the SDK sends back when an agent appends the assistant message it got
    refusal: str | None = None
    reasoning_content: str | None = None  # an assistant's thought, sent back

    def as_template_input(self) -> dict[str, Any]:
        content = self.content
        if isinstance(content, list):
            content = "".join(part.text for part in content)
        role = "system" if self.role == "developer" else self.role
        out: dict[str, Any] = {"role": role, "content": content or ""}
        if self.tool_calls:
            out["content"] = content
            out["tool_calls"] = [call.model_dump() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.reasoning_content is not None and self.role == "assistant":
            out["reasoning_content"] = self.reasoning_content
        return out


class StreamOptions(BaseModel):
    model_config = STRICT
    include_usage: StrictBool = False


class _Common(BaseModel):
    model_config = STRICT

    model: str = Field(min_length=1)
    max_tokens: StrictInt | None = Field(None, ge=1)
    temperature: StrictFloat | None = Field(None, ge=0.0, le=2.0)
    top_p: StrictFloat | None = Field(None, gt=0.0, le=1.0)
    seed: StrictInt | None = Field(None, ge=0, lt=2**63)
    stop: StopString | Annotated[list[StopString], Field(max_length=MAX_STOP_STRINGS)] | None = None
    n: StrictInt = Field(1, ge=1)
    presence_penalty: StrictFloat | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: StrictFloat | None = Field(None, ge=-2.0, le=2.0)
    logit_bias: LogitBias | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    # Reame's extras
    top_k: StrictInt | None = Field(None, ge=0)
    min_p: StrictFloat | None = Field(None, ge=0.0, le=1.0)
    repetition_penalty: StrictFloat | None = Field(None, gt=0.0, le=10.0)
    ignore_eos: StrictBool = False
    speculation: Literal["auto", "on", "off"] | None = None
    # false: computed again (a benchmark's), neither looked up nor kept
    answer_memory: StrictBool = True
    session_id: str | None = Field(None, min_length=1, max_length=128)
    best_of: StrictInt | None = Field(None, ge=1)
    vote_on: str | None = Field(None, min_length=1, max_length=64)
    vote_early_stop: StrictBool = True
    response_format: ResponseFormat | None = None
    grammar: GrammarText | GrammarRule | None = None

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, stop: str | list[str] | None) -> list[str] | None:
        return [stop] if isinstance(stop, str) else stop

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def sampling_options(self) -> dict[str, object]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "stop": tuple(self.stop) if self.stop else None,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "logit_bias": {int(k): v for k, v in self.logit_bias.items()}
            if self.logit_bias
            else None,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "ignore_eos": self.ignore_eos or None,
            "speculation": self.speculation,
        }


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)
    logprobs: StrictBool = False
    top_logprobs: StrictInt | None = Field(None, ge=0, le=20)
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: StrictBool = True
    # thinking models (docs/models.md): how long to think, and the template's own variables
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    reasoning_budget: StrictInt | None = Field(None, ge=0)
    chat_template_kwargs: (
        Annotated[dict[Annotated[str, Field(max_length=64)], PlainValue], Field(max_length=32)]
        | None
    ) = None
    # the last message, the assistant's, is the start of the answer, which goes on from it
    continue_final_message: StrictBool = False

    @model_validator(mode="after")
    def _continues_an_answer(self) -> ChatRequest:
        last = self.messages[-1]
        if self.continue_final_message and (last.role != "assistant" or last.tool_calls):
            raise ValueError(
                "continue_final_message goes on from a last message of the assistant's "
                "(without tool calls)"
            )
        return self

    def sampling_options(self) -> dict[str, object]:
        return {
            **super().sampling_options(),
            "max_tokens": self.max_completion_tokens or self.max_tokens,
            "logprobs": self.logprobs or None,
            "top_logprobs": self.top_logprobs if self.logprobs else None,
        }


class CompletionRequest(_Common):
    prompt: (
        str
        | Annotated[list[str], Field(min_length=1)]
        | Annotated[list[TokenIdValue], Field(min_length=1)]
        | Annotated[list[Annotated[list[TokenIdValue], Field(min_length=1)]], Field(min_length=1)]
    )
    logprobs: StrictInt | None = Field(None, ge=0, le=5)
    echo: Literal[False] = False

    def prompts(self) -> list[str | list[int]]:
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if p and all(isinstance(x, int) for x in p):
            return [p]  # type: ignore[list-item]
        return list(p)  # type: ignore[arg-type]

    def sampling_options(self) -> dict[str, object]:
        return {
            **super().sampling_options(),
            "max_tokens": self.max_tokens or 16,  # OpenAI's default for completions
            "logprobs": self.logprobs is not None or None,
            "top_logprobs": self.logprobs,
        }
