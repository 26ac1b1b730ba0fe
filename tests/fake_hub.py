"""A local stand-in for the Hugging Face hub's file endpoints, for tests.

Serves `HEAD` and `GET /{repo}/resolve/{revision}/{filename}` with the headers huggingface_hub
2.x reads (see `get_hf_file_metadata` and `http_get` in huggingface_hub/file_download.py):
`X-Repo-Commit` (required), `ETag` / `X-Linked-Etag` (the sha256, as for LFS files),
`X-Linked-Size` and `Content-Length`, and `Range` requests answered with 206 so a dropped
download can resume. Missing repos and files get 404 with the hub's `X-Error-Code`.

Faults, for testing what the client does with them:
- `hub.interrupt(at=N)`: the next GET drops the connection once byte N of the file is sent;
  with `then_status=503` the hub also answers everything with 503 until `hub.restore()`.
- `hub.corrupt[(repo, filename)] = data`: GET sends `data` while the headers still describe the
  real file (a damaged mirror or CDN).

Use the `fake_hub` fixture (import `fake_hub_fixture` into a test module to register it).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest

FileKey = tuple[str, str]  # (repo, filename)

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<filename>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass(slots=True)
class RequestRecord:
    method: str
    path: str
    range: str | None


@dataclass(slots=True)
class _Interruption:
    at: int
    times: int
    then_status: int | None
    on_cut: Callable[[], None] | None


@dataclass(slots=True)
class FakeHub:
    url: str = ""
    files: dict[FileKey, bytes] = field(default_factory=dict)
    corrupt: dict[FileKey, bytes] = field(default_factory=dict)
    requests: list[RequestRecord] = field(default_factory=list)
    down_status: int | None = None
    _interruption: _Interruption | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: _Server | None = None
    bind: str = "127.0.0.1"  # "0.0.0.0" lets a container reach it through the bridge gateway

    def add(self, repo: str, filename: str, data: bytes) -> str:
        """Publish a file; return its sha256 (what the hub sends as its ETag)."""
        self.files[(repo, filename)] = data
        return hashlib.sha256(data).hexdigest()

    def interrupt(
        self,
        at: int,
        times: int = 1,
        then_status: int | None = None,
        on_cut: Callable[[], None] | None = None,
    ) -> None:
        """Drop the next `times` GET connections once file byte `at` is sent.

        `on_cut` runs in the server thread while the client waits for the rest of the body.
        """
        with self._lock:
            self._interruption = _Interruption(at, times, then_status, on_cut)

    def restore(self) -> None:
        with self._lock:
            self._interruption = None
            self.down_status = None

    def gets(self) -> list[RequestRecord]:
        return [r for r in self.requests if r.method == "GET"]

    def start(self) -> None:
        server = _Server(self)
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _cut_point(self, start: int, end: int) -> _Interruption | None:
        with self._lock:
            cut = self._interruption
            if cut is None or cut.times <= 0 or not start <= cut.at <= end:
                return None
            cut.times -= 1
            return cut

    def _after_cut(self, cut: _Interruption) -> None:
        if cut.on_cut is not None:
            cut.on_cut()
        if cut.then_status is not None:
            with self._lock:
                self.down_status = cut.then_status


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Clients keep idle connections open in a pool; stopping must not wait for them.
    block_on_close = False

    def __init__(self, hub: FakeHub) -> None:
        super().__init__((hub.bind, 0), _Handler)
        self.hub = hub


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds an idle kept-alive connection may hold a server thread
    server: _Server

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    def do_GET(self) -> None:
        self._serve(send_body=True)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass

    @property
    def hub(self) -> FakeHub:
        return self.server.hub

    def _serve(self, send_body: bool) -> None:
        hub = self.hub
        hub.requests.append(RequestRecord(self.command, self.path, self.headers.get("Range")))
        if hub.down_status is not None:
            self._send_empty(hub.down_status, {})
            return
        match = _RESOLVE.match(urlsplit(self.path).path)
        if match is None:
            self._send_empty(404, {})
            return
        repo, filename = unquote(match["repo"]), unquote(match["filename"])
        commit = hashlib.sha1(repo.encode()).hexdigest()
        if not any(key[0] == repo for key in hub.files):
            self._send_empty(404, {"X-Error-Code": "RepoNotFound"})
            return
        data = hub.files.get((repo, filename))
        if data is None:
            self._send_empty(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit})
            return
        self._send_file(repo, filename, data, commit, send_body)

    def _send_file(
        self, repo: str, filename: str, data: bytes, commit: str, send_body: bool
    ) -> None:
        sha256 = hashlib.sha256(data).hexdigest()
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{sha256}"',
            "X-Linked-Etag": f'"{sha256}"',
            "X-Linked-Size": str(len(data)),
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        start, end = 0, len(data) - 1
        status = 200
        ranged = _RANGE.match(self.headers.get("Range", "")) if send_body else None
        if ranged is not None:
            start = int(ranged[1])
            end = min(int(ranged[2]), end) if ranged[2] else end
            if start > end:
                self._send_empty(416, {"Content-Range": f"bytes */{len(data)}"})
                return
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        headers["Content-Length"] = str(end - start + 1)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            body = self.hub.corrupt.get((repo, filename), data)[start : end + 1]
            self._send_body(body, start, end)

    def _send_body(self, body: bytes, start: int, end: int) -> None:
        cut = self.hub._cut_point(start, end)
        if cut is None:
            self.wfile.write(body)
            return
        self.wfile.write(body[: cut.at - start])
        self.wfile.flush()
        self.hub._after_cut(cut)
        # Closing with bytes still owed against Content-Length is what a dropped link looks like.
        self.close_connection = True

    def _send_empty(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(name="fake_hub")
def fake_hub_fixture() -> Iterator[FakeHub]:
    hub = FakeHub()
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
