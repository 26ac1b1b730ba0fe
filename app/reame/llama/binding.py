"""The one import of llama_cpp (llama-cpp-python's ctypes bindings): the other reame.llama
modules wrap what Reame needs of it, and nothing outside this package touches it."""

import llama_cpp as lc

__all__ = ["lc"]
