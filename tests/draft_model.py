"""A smaller draft model made from a real one: the same GGUF with fewer transformer blocks.

No smaller sibling of the embedded models can be fetched where Reame is tested, so the tests make
one (conftest.py's smollm2_draft_path). It keeps the vocabulary, the embeddings, the output head
and the first and last blocks (the first blocks read the tokens, the last ones write the
prediction; the middle ones matter least), so it drafts what the full model would often say, at a
fraction of a step.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import gguf

from reame.errors import ConfigError

_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


def kept_blocks(num_blocks: int, keep: int) -> list[int]:
    """Which blocks a draft of `keep` blocks takes: about two thirds from the start, the rest
    from the end."""
    if not 0 < keep < num_blocks:
        raise ConfigError(f"a draft keeps between 1 and {num_blocks - 1} blocks, not {keep}")
    head = max(1, (2 * keep + 2) // 3)
    return list(range(head)) + list(range(num_blocks - (keep - head), num_blocks))


def build_layer_draft(source: Path, target: Path, keep: int) -> Path:
    """Write `target`: `source` with only `keep` of its blocks, renumbered. Written to a temp
    file and renamed, so a half-written draft is never found."""
    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    count_key = gguf.Keys.LLM.BLOCK_COUNT.format(arch=arch)
    num_blocks = int(reader.fields[count_key].contents())
    blocks = kept_blocks(num_blocks, keep)
    new_index = {old: new for new, old in enumerate(blocks)}
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(temp, arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = keep if field.name == count_key else field.contents()
        if isinstance(value, list) and len(value) == num_blocks:  # per-block settings
            value = [value[b] for b in blocks]
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    tensors = []
    for tensor in reader.tensors:
        match = _BLOCK.match(tensor.name)
        if match is None:
            tensors.append((tensor.name, tensor))
        elif int(match[1]) in new_index:
            tensors.append((f"blk.{new_index[int(match[1])]}.{match[2]}", tensor))
    for name, tensor in tensors:
        writer.add_tensor_info(
            name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, tensor in tensors:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    os.replace(temp, target)
    return target
