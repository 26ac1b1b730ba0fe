"""A real redis-server (Debian's package) on 127.0.0.1 for the shared tier's tests: no
persistence, an LRU memory budget as the cluster profile sets for Valkey. Skipped without it."""

from __future__ import annotations

import shutil

import pytest

from reame_bench.cluster_processes import RedisProcess


class RedisServer(RedisProcess):
    def __init__(self, maxmemory: str = "256mb") -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
        super().__init__(maxmemory)
