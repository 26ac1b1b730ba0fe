"""The shipped HAProxy config (docker/haproxy/haproxy.cfg) run by Debian's haproxy on 127.0.0.1:
its binds moved to free ports, its `server-template` lines replaced by the test's replicas (as
the Ansible playbook does), health checks every 300 ms so a test need not wait for them."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from server_process import free_port

SHIPPED = Path(__file__).parents[1] / "docker" / "haproxy" / "haproxy.cfg"


def render(config: str, servers: list[str], ports: dict[str, int]) -> str:
    """`servers`: host:port of each replica; `ports`: the new port of :8000, :8001 and :8404."""
    lines = []
    for line in config.splitlines():
        stripped = line.strip()
        if stripped.startswith("server-template "):
            lines += [f"    server r{i + 1} {addr}" for i, addr in enumerate(servers)]
            continue
        if stripped.startswith("bind :"):
            line = f"    bind 127.0.0.1:{ports[stripped.removeprefix('bind ')]}"
        lines.append(line.replace("inter 2s", "inter 300ms"))
    return "\n".join(lines) + "\n"


class HAProxy:
    def __init__(self, servers: list[str]) -> None:
        if shutil.which("haproxy") is None:
            pytest.skip("haproxy is not installed (Debian: apt-get install haproxy)")
        self.ports = {":8000": free_port(), ":8001": free_port(), ":8404": free_port()}
        self.by_key = f"http://127.0.0.1:{self.ports[':8000']}"
        self.by_body = f"http://127.0.0.1:{self.ports[':8001']}"
        self.stats = f"http://127.0.0.1:{self.ports[':8404']}"
        self.path = Path(tempfile.mkdtemp(prefix="haproxy-")) / "haproxy.cfg"
        self.path.write_text(render(SHIPPED.read_text(), servers, self.ports))
        self.proc = subprocess.Popen(
            ["haproxy", "-W", "-db", "-f", str(self.path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.wait_up(len(servers))

    def servers_up(self) -> int:
        """Replicas whose /ready check passes, as HAProxy's own metrics say."""
        with urllib.request.urlopen(f"{self.stats}/metrics", timeout=5) as r:
            text = r.read().decode()
        return sum(
            1
            for line in text.splitlines()
            if line.startswith("haproxy_server_status{")
            and 'proxy="replicas_by_route_key"' in line
            and 'state="UP"' in line
            and line.endswith(" 1")
        )

    def wait_up(self, count: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {self.proc.stderr.read()}")
            try:
                if self.servers_up() == count:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"haproxy did not see {count} replicas up")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
