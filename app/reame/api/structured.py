"""What a request's response_format or grammar asks its output to match, as a grammar spec.
Pure: compiling it is the grammar module's job."""

from __future__ import annotations

from reame.api.errors import ApiError
from reame.api.schemas import (
    ChatRequest,
    CompletionRequest,
    GrammarRule,
    JsonObjectFormat,
    JsonSchemaResponseFormat,
)
from reame.grammar.matcher import GrammarSpec


def requested_grammar(body: ChatRequest | CompletionRequest) -> GrammarSpec | None:
    """The spec of `response_format` or `grammar` (one of them at most); None: free text."""
    fmt, grammar = body.response_format, body.grammar
    is_structured = isinstance(fmt, JsonObjectFormat | JsonSchemaResponseFormat)
    if is_structured and grammar is not None:
        raise ApiError(400, "send response_format or grammar, not both", "grammar", "invalid_value")
    if isinstance(fmt, JsonObjectFormat):
        schema = fmt.schema_
        return GrammarSpec("json_object") if schema is None else GrammarSpec.json_schema(schema)
    if isinstance(fmt, JsonSchemaResponseFormat):
        return GrammarSpec.json_schema(fmt.json_schema.schema_)
    if isinstance(grammar, GrammarRule):
        return GrammarSpec(grammar.type, grammar.value, "grammar")
    if isinstance(grammar, str):
        return GrammarSpec("grammar", grammar, "grammar")
    return None


def is_json(spec: GrammarSpec | None) -> bool:
    """Answers under this spec are JSON (a Conclave votes on their parsed value)."""
    return spec is not None and spec.kind in ("json_object", "json_schema")
