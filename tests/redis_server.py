"""A real redis-server (Debian's package) on 127.0.0.1 for the shared tier's tests: no
persistence, an LRU memory budget as the cluster profile sets for Valkey."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
import redis

from server_process import free_port


class RedisServer:
    def __init__(self, maxmemory: str = "256mb") -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
        self.port, self.maxmemory = free_port(), maxmemory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--maxmemory", self.maxmemory,
                "--maxmemory-policy", "allkeys-lru",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = self.client()
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer")

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
