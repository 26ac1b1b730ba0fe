"""The shipped HAProxy config (docker/haproxy/haproxy.cfg) run by Debian's haproxy on 127.0.0.1,
as reame_bench.cluster_processes renders it, with health checks every 300 ms so a test need not
wait for them. Skipped without haproxy."""

from __future__ import annotations

import shutil

import pytest

from reame_bench.cluster_processes import SHIPPED_HAPROXY, HAProxyProcess, render_haproxy

__all__ = ["SHIPPED", "HAProxy", "render"]
SHIPPED = SHIPPED_HAPROXY
CHECK_INTERVAL = "300ms"


def render(config: str, servers: list[str], ports: dict[str, int]) -> str:
    return render_haproxy(config, servers, ports, CHECK_INTERVAL)


class HAProxy(HAProxyProcess):
    def __init__(
        self, servers: list[str], name_servers: bool = False, up: int | None = None
    ) -> None:
        if shutil.which("haproxy") is None:
            pytest.skip("haproxy is not installed (Debian: apt-get install haproxy)")
        super().__init__(servers, check_interval=CHECK_INTERVAL, name_servers=name_servers, up=up)
