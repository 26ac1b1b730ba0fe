"""Constrained decoding, in one place. Import the module you need; nothing is re-exported.

- matcher.py: compiling grammars and matching tokens against them (the one module that imports
  llguidance);
- decoding.py: a sequence under a grammar in the engine: its masks, its forced tokens, its
  drafts cut to what the grammar accepts;
- tool_calls.py: the grammar a tool-calling answer must match, built of lark_parts.py, and of
  xml.py (Qwen3-Coder's XML calls) or pythonic.py (LFM2's Python calls) for the families that
  write each argument apart.
"""
