"""OpenAI tool calls over a model's own chat template: the formats, the prompt, the parsing (the
grammar a call must match is in reame.grammar.tool_calls)."""
