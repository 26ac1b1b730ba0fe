"""A stand-in replica for HAProxy's tests, where a real Reame cannot be made to answer a given
way on demand: a real HTTP server in its own process (`python edge_replica.py PORT MODE`) that
answers GET /ready with 200 and every POST by MODE:

- ok: 200, naming itself;
- fail: 500, as a replica does to a request that failed in it;
- drain: 503 with Retry-After, as a draining replica refuses a call, and from then on its /ready
  says 503 too;
- die: the process exits with the request read and nothing answered, as a replica killed by the
  request it was serving (a crash, the OOM killer).

Each POST it reads is printed to stdout, one line, before it answers, so a test counts what
reached it even when it died of it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODES = ("ok", "fail", "drain", "die")


def serve(port: int, mode: str) -> None:
    draining = False

    class Handler(BaseHTTPRequestHandler):
        def answer(self, status: int, body: bytes, **headers: str) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/ready" and draining:
                self.answer(503, b'{"error": {"code": "draining"}}')
            else:
                self.answer(200, b'{"status": "ready"}')

        def do_POST(self) -> None:  # noqa: N802
            nonlocal draining
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            print(f"POST {self.path} {len(body)}", flush=True)
            if mode == "die":
                os._exit(1)
            if mode == "fail":
                self.answer(500, b'{"error": {"code": "server_error"}}')
            elif mode == "drain":
                draining = True
                self.answer(503, b'{"error": {"code": "shutting_down"}}', retry_after="5")
            else:
                self.answer(200, b'{"served": true}')

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


class EdgeReplica:
    """The stand-in run as a child process; `posts()`: how many POSTs reached it."""

    def __init__(self, port: int, mode: str, log_dir: Path) -> None:
        assert mode in MODES, mode
        self.port, self.mode = port, mode
        self.address = f"127.0.0.1:{port}"
        self.log = log_dir / f"replica-{port}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, str(port), mode], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.address}/ready", timeout=1):
                    return
            except OSError:
                assert self.proc.poll() is None, self.log.read_text()
                assert time.monotonic() < deadline, "the stand-in replica did not start"
                time.sleep(0.05)

    def posts(self) -> int:
        return sum(line.startswith("POST ") for line in self.log.read_text().splitlines())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
