"""Owning wrappers over llama.cpp (llama-cpp-python's low-level API).

NOTE: the modules of this package are the only ones that import llama_cpp. Every C resource
here has close() and a context manager; nothing else holds a raw pointer:

- backend.py: the process-wide backend, loaded once; llama.cpp's log routed to structlog; what
  the build and the CPU offer.
- model.py: a loaded GGUF model and its vocabulary.
- context.py: a context (a KV cache for several sequences, one batch) and its shape.
- quantize.py: llama.cpp's own quantizer.
"""
