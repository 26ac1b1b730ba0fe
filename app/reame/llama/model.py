"""A loaded GGUF model (weights mmapped) and its vocabulary: tokens to text and back, its
metadata, what its memory can be cut back to.

NOTE: llama_cpp comes from reame.llama.binding, its one import.
"""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

from reame.errors import ModelLoadError
from reame.llama.backend import cpu_extra_buffers, init_backend, load_model_file
from reame.llama.binding import lc


class Model:
    """A loaded GGUF model (weights mmapped) and its vocabulary."""

    def __init__(self, path: Path) -> None:
        init_backend()
        params = lc.llama_model_default_params()
        params.n_gpu_layers = 0
        # NOTE: ggml's AMX matmul segfaults on the first decode on Sapphire Rapids VMs (seen
        # here on SmolLM2 Q4_1; llama.cpp#20824, dspy#10079): where the CPU backend offers AMX
        # buffers, weights stay in plain CPU buffers (no AMX, no repacking)
        params.use_extra_bufts = "AMX" not in cpu_extra_buffers()
        ptr, errors = load_model_file(path, params)
        if not ptr:
            cause = errors[0].split("error loading model: ")[-1] if errors else "no reason given"
            raise ModelLoadError(
                f"llama.cpp could not load {path} ({cause}): the file is damaged, truncated or "
                "of an architecture this llama.cpp does not know; re-download it "
                "(`reame pull MODEL`)"
            )
        self.path = path
        self._ptr = ptr
        self._vocab = lc.llama_model_get_vocab(ptr)
        self.vocab_size: int = lc.llama_vocab_n_tokens(self._vocab)
        self.context_train: int = lc.llama_model_n_ctx_train(ptr)
        self.bos_id: int = lc.llama_vocab_bos(self._vocab)
        self.eos_id: int = lc.llama_vocab_eos(self._vocab)
        template = lc.llama_model_chat_template(ptr, None)
        self.chat_template: str | None = template.decode() if template else None
        self.name = self.meta("general.name") or path.stem
        self.architecture = self.meta("general.architecture") or "unknown"
        self.num_layers: int = lc.llama_model_n_layer(ptr)
        self.memory_kind = _memory_kind(ptr)
        self.kv_bytes_per_token = self._kv_bytes_per_token()
        self._pieces: dict[int, bytes] = {}

    def _kv_bytes_per_token(self) -> int:
        """f16 K and V of one token over all layers (head sizes from the metadata when set)."""
        num_heads = max(lc.llama_model_n_head(self._ptr), 1)
        default_dim = lc.llama_model_n_embd(self._ptr) // num_heads
        dims = [
            int(self.meta(f"{self.architecture}.attention.{kind}_length") or default_dim)
            for kind in ("key", "value")
        ]
        return 2 * self.num_layers * lc.llama_model_n_head_kv(self._ptr) * sum(dims)

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = lc.llama_model_meta_val_str(self._ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def tokenize(
        self, text: str, add_special: bool = True, parse_special: bool = True
    ) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (lc.llama_token * capacity)()
        n = lc.llama_tokenize(
            self._vocab, data, len(data), buf, capacity, add_special, parse_special
        )
        if n < 0:  # capacity too small: -n is what it needs
            capacity = -n
            buf = (lc.llama_token * capacity)()
            n = lc.llama_tokenize(
                self._vocab, data, len(data), buf, capacity, add_special, parse_special
            )
        return list(buf[:n])

    def tokenizer_fingerprint(self) -> str:
        """Names the vocabulary: token ids mean the same text under the same fingerprint."""
        h = hashlib.blake2b(digest_size=8)
        h.update(f"{self.vocab_size}:{self.bos_id}:{self.eos_id}".encode())
        for token in range(0, self.vocab_size, 7):  # NOTE: a sample keeps start-up fast
            h.update(self._to_piece(token, special=True))
        return f"vocab-{h.hexdigest()}"

    @property
    def adds_eos(self) -> bool:
        """The tokenizer appends an end-of-sequence token to what it tokenizes."""
        return bool(lc.llama_vocab_get_add_eos(self._vocab))

    def is_splitting_token(self, text: str) -> bool:
        """`text` is one control (or user-defined) token that does not strip the whitespace
        before it: llama.cpp splits text there before tokenizing, so the text on either side
        tokenizes alone exactly as it does in the whole."""
        tokens = self.tokenize(text, add_special=False)
        if len(tokens) != 1:
            return False
        attr = lc.llama_vocab_get_attr(self._vocab, tokens[0])
        special = lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_USER_DEFINED
        return bool(attr & special) and not attr & lc.LLAMA_TOKEN_ATTR_LSTRIP

    def piece(self, token: int) -> bytes:
        """The bytes a token adds to generated text (control tokens add none)."""
        cached = self._pieces.get(token)
        if cached is None:
            cached = self._pieces[token] = self._to_piece(token, special=False)
        return cached

    def token_text(self, token: int) -> str:
        """A token's text including special tokens' names (for templates)."""
        return self.special_piece(token).decode("utf-8", "replace")

    def special_piece(self, token: int) -> bytes:
        """A token's bytes, a special token's name included (llama-server's /tokenize pieces)."""
        return self._to_piece(token, special=True)

    def _to_piece(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def is_end_of_generation(self, token: int) -> bool:
        return bool(lc.llama_vocab_is_eog(self._vocab, token))

    def end_of_generation_ids(self) -> list[int]:
        return [t for t in range(self.vocab_size) if lc.llama_vocab_is_eog(self._vocab, t)]

    @property
    def vocab_handle(self) -> object:
        """llama.cpp's vocabulary pointer, for libraries that read it (llguidance)."""
        return self._vocab

    def close(self) -> None:
        if self._ptr:
            lc.llama_model_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _memory_kind(ptr: object) -> str:
    """ "attention" (a KV cache, cut anywhere), "recurrent" (one state a sequence) or "hybrid"
    (both): what a sequence can be cut back to, as llama.cpp says of the model."""
    if lc.llama_model_is_hybrid(ptr):
        return "hybrid"
    return "recurrent" if lc.llama_model_is_recurrent(ptr) else "attention"
