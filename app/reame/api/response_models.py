"""The response bodies Reame sends, as pydantic models: the OpenAPI document's response schemas.

They describe what openai_format.py, calls.py, server_app.py and sessions.py build (nothing builds
from these), strictly (unknown fields are refused), so a fuzzer's response-schema check catches
a body that drifts from the document.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptTokensDetails(_Strict):
    cached_tokens: int


class CompletionTokensDetails(_Strict):
    reasoning_tokens: int  # of a thinking model's thought
    accepted_prediction_tokens: int  # draft tokens verified and kept in the answer
    rejected_prediction_tokens: int  # draft tokens verified and rolled back


class Usage(_Strict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails


class Conclave(_Strict):
    n: int
    answer: str | None
    candidate: int
    tally: dict[str, int]
    majority: bool
    abstained: int
    stopped_early: int
    tokens_saved: int


class TopLogprob(_Strict):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(_Strict):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprob]


class ChatLogprobs(_Strict):
    content: list[TokenLogprob]


class AssistantMessage(_Strict):
    role: Literal["assistant"]
    content: str
    reasoning_content: str | None = None  # a thinking model's thought, apart from the answer


FinishReason = Literal["stop", "length"]


class ChatChoice(_Strict):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: FinishReason | None


class ChatCompletion(_Strict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    conclave: Conclave | None = None  # only with best_of > 1


class CompletionLogprobs(_Strict):
    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(_Strict):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: FinishReason | None


class TextCompletion(_Strict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage
    conclave: Conclave | None = None


class ChatDelta(_Strict):
    role: Literal["assistant"] | None = None  # the first chunk of a choice
    content: str | None = None  # absent from a finish chunk that adds no text
    reasoning_content: str | None = None  # a thinking model's thought, before the content


class ChatChunkChoice(_Strict):
    index: int
    delta: ChatDelta
    logprobs: ChatLogprobs | None
    finish_reason: FinishReason | None


class ChatCompletionChunk(_Strict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]  # none in the usage chunk
    usage: Usage | None = None  # the usage chunk, with stream_options.include_usage


class TextCompletionChunk(_Strict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(_Strict):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(_Strict):
    object: Literal["list"]
    data: list[ModelCard]


class Session(_Strict):
    id: str
    object: Literal["session"]
    created: int
    last_used: int
    turns: int
    cached_tokens: int
    bytes: int


class SessionList(_Strict):
    object: Literal["list"]
    data: list[Session]


class SessionDeleted(_Strict):
    id: str
    object: Literal["session.deleted"]
    deleted: Literal[True]


class ErrorDetail(_Strict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(_Strict):
    error: ErrorDetail


class Health(_Strict):
    status: Literal["ok", "degraded", "error"]
    reason: str | None = None  # why it is degraded (state not kept) or failing (engine died)


class Ready(_Strict):
    status: Literal["ready"]
    model: str


class WarmUsage(_Strict):
    prompt_tokens: int
    prompt_tokens_details: PromptTokensDetails  # cached_tokens: what it found computed


class Warmed(_Strict):
    object: Literal["warm"]
    model: str
    usage: WarmUsage


class TokenPiece(_Strict):
    id: int
    piece: str | list[int]  # its bytes where they are no whole UTF-8 text


class Tokenized(_Strict):
    tokens: list[int] | list[TokenPiece]


class Detokenized(_Strict):
    content: str


class MessageUsage(_Strict):
    input_tokens: int  # computed (Anthropic counts cache reads apart)
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


class MessageText(_Strict):
    type: Literal["text"]
    text: str


class MessageThinking(_Strict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class MessageToolUse(_Strict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, object]


class AnthropicMessage(_Strict):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[MessageThinking | MessageText | MessageToolUse]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]
    stop_sequence: str | None
    usage: MessageUsage


class TokenCount(_Strict):
    input_tokens: int


class AnthropicErrorDetail(_Strict):
    type: str
    message: str


class AnthropicError(_Strict):
    type: Literal["error"]
    error: AnthropicErrorDetail


class ResponseInputTokens(_Strict):
    cached_tokens: int  # what it found computed: a chained call's whole earlier conversation
    cache_write_tokens: int


class ResponseOutputTokens(_Strict):
    reasoning_tokens: int


class ResponseUsage(_Strict):
    input_tokens: int
    input_tokens_details: ResponseInputTokens
    output_tokens: int
    output_tokens_details: ResponseOutputTokens
    total_tokens: int


class OutputText(_Strict):
    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, object]]
    logprobs: list[dict[str, object]]


ItemStatus = Literal["in_progress", "completed", "incomplete"]


class OutputMessage(_Strict):
    type: Literal["message"]
    id: str
    status: ItemStatus
    role: Literal["assistant"]
    content: list[OutputText]


class OutputFunctionCall(_Strict):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: ItemStatus


class OutputReasoningText(_Strict):
    type: Literal["reasoning_text"]
    text: str


class OutputReasoning(_Strict):
    type: Literal["reasoning"]
    id: str
    summary: list[dict[str, object]]
    content: list[OutputReasoningText]
    status: ItemStatus


class ResponseObject(_Strict):
    """A Responses API answer (docs/responses-api.md)."""

    id: str
    object: Literal["response"]
    created_at: int
    status: Literal["completed", "incomplete", "in_progress", "failed"]
    error: dict[str, object] | None
    incomplete_details: dict[str, object] | None
    instructions: str | None
    max_output_tokens: int | None
    model: str
    output: list[OutputMessage | OutputFunctionCall | OutputReasoning]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: dict[str, object]
    store: bool
    temperature: float | None
    text: dict[str, object]
    tool_choice: str | dict[str, object]
    tools: list[dict[str, object]]
    top_p: float | None
    truncation: Literal["disabled"]
    usage: ResponseUsage | None
    user: str | None
    metadata: dict[str, str]


class ResponseDeleted(_Strict):
    id: str
    object: Literal["response"]
    deleted: Literal[True]


MODELS: tuple[type[BaseModel], ...] = (
    ChatCompletion,
    TextCompletion,
    ModelList,
    ModelCard,
    SessionList,
    Session,
    SessionDeleted,
    ErrorBody,
    Health,
    Ready,
    Tokenized,
    Detokenized,
    Warmed,
    AnthropicMessage,
    TokenCount,
    AnthropicError,
    ResponseObject,
    ResponseDeleted,
)
