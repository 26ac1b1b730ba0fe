"""Owning wrappers over llama.cpp (llama-cpp-python's low-level API).

NOTE: this package is all of Reame that uses llama_cpp (imported once, in binding.py). Every C
resource here has close() and a context manager; nothing else holds a raw pointer:

- binding.py: the one import of llama_cpp.
- backend.py: the process-wide backend, loaded once; llama.cpp's log routed to structlog; what
  the build and the CPU offer.
- model.py: a loaded GGUF model and its vocabulary.
- context.py: a context (a KV cache for several sequences, one batch) and its shape.
- quantize.py: llama.cpp's own quantizer.
"""
