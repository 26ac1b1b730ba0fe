"""OpenAI tool calls over a model's own chat template: the prompt, the grammar, the parsing."""
