"""Reame: a CPU-only LLM inference server on llama.cpp that never computes the same thing twice."""

__version__ = "0.1.0"
