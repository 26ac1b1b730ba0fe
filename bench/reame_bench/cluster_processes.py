"""The servers a cluster runs beside Reame, as local processes on 127.0.0.1: redis-server as the
shared tier (no persistence, an LRU budget, as the compose profile sets Valkey) and HAProxy on the
shipped config (its binds moved to free ports, its `server-template` lines replaced by the given
replicas, as the Ansible playbook does). `reame bench --cluster` and the tests start them."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import redis

from reame.errors import ConfigError
from reame_bench.serve_process import free_port

# NOTE: in a checkout; an installed package has no docker/ beside it, so --haproxy-config
SHIPPED_HAPROXY = Path(__file__).resolve().parents[2] / "docker" / "haproxy" / "haproxy.cfg"
SERVER_HEADER = "X-Reame-Server"


def require(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise ConfigError(f"{program} is not installed (Debian: apt-get install {package})")
    return path


class RedisProcess:
    def __init__(self, maxmemory: str = "256mb") -> None:
        self.program = require("redis-server", "redis-server")
        self.port, self.maxmemory = free_port(), maxmemory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.program,
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

    def used_bytes(self) -> int:
        return int(self.client().info("memory")["used_memory"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def render_haproxy(
    config: str,
    servers: list[str],
    ports: dict[str, int],
    check_interval: str | None = None,
    name_servers: bool = False,
) -> str:
    """`servers`: host:port of each replica; `ports`: the new port of :8000, :8001 and :8404;
    `check_interval` replaces the health checks' `inter 2s`; `name_servers` adds a response
    header naming the replica that answered (a bench attributes each answer by it)."""
    lines = []
    for line in config.splitlines():
        stripped = line.strip()
        if stripped.startswith("server-template "):
            if name_servers:
                lines.append(f"    http-response set-header {SERVER_HEADER} %s")
            lines += [f"    server r{i + 1} {addr}" for i, addr in enumerate(servers)]
            continue
        if stripped.startswith("bind :"):
            line = f"    bind 127.0.0.1:{ports[stripped.removeprefix('bind ')]}"
        if check_interval is not None:
            line = line.replace("inter 2s", f"inter {check_interval}")
        lines.append(line)
    return "\n".join(lines) + "\n"


class HAProxyProcess:
    def __init__(
        self,
        servers: list[str],
        config: Path = SHIPPED_HAPROXY,
        check_interval: str | None = None,
        name_servers: bool = False,
        up: int | None = None,
    ) -> None:
        """`up`: how many replicas to wait for HAProxy to see up (default: all of them)."""
        program = require("haproxy", "haproxy")
        if not config.is_file():
            raise ConfigError(f"no HAProxy config at {config}: give --haproxy-config")
        self.ports = {":8000": free_port(), ":8001": free_port(), ":8404": free_port()}
        self.by_key = f"http://127.0.0.1:{self.ports[':8000']}"
        self.by_body = f"http://127.0.0.1:{self.ports[':8001']}"
        self.stats = f"http://127.0.0.1:{self.ports[':8404']}"
        self.path = Path(tempfile.mkdtemp(prefix="haproxy-")) / "haproxy.cfg"
        rendered = render_haproxy(
            config.read_text(), servers, self.ports, check_interval, name_servers
        )
        self.path.write_text(rendered)
        self.proc = subprocess.Popen(
            [program, "-W", "-db", "-f", str(self.path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.wait_up(len(servers) if up is None else up)

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
