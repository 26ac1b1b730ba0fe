"""The disk tier's states filed in the prefix index at start, by their token ids: a state kept
before a restart then serves the prompts that share only some of it, as one kept since does."""

from __future__ import annotations

from reame.cache.disk_tier import DiskTier, parse_name, stored_files
from reame.cache.fingerprint import Fingerprint
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.prefix_index import PrefixIndex
from reame.cache.snapshot_format import SnapshotError, read_tokens


def index_disk(disk: DiskTier, index: PrefixIndex, fingerprint: Fingerprint) -> int:
    """File each of the disk's states, least recently used first, by the token ids read from
    its head (checked against their checksum and the fingerprint; the state itself is checked
    whole when it is used, and a file that does not check out then is removed). A state kept
    for a key's scope names no scope in its file: found by its whole prefix only. The count
    filed."""
    count = 0
    for stored in sorted(stored_files(disk.root / disk.fingerprint), key=lambda f: f.last_used):
        named = parse_name(stored.path.name)
        head = disk.read_head(stored.path) if named is not None else None
        if named is None or head is None:
            continue
        length, key = named
        try:
            tokens = read_tokens(head, fingerprint)
        except SnapshotError:
            continue
        chain = group_chain(tokens)
        group = stored.path.parent.name  # NOTE: a file sits in its group's directory
        filed_so = len(tokens) == length and chain[group_of(length)] == group
        if filed_so and prefix_key(chain, tokens, length) == key:
            index.add(key, group, chain, tokens)
            count += 1
    return count
