"""Raw HTTP/1.1 on non-blocking sockets, for `reame bench --hostile`'s attacker: what an HTTP
client library will not do (a receive buffer of a few KB, a body sent a byte at a time, a
connection opened and left silent), cheap enough that the attacker's own CPU stays small."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

HOST = "127.0.0.1"
HEAD_END = b"\r\n\r\n"


class Sockets:
    """Every socket the attacker opens, so that all are closed when it stops."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.open: set[socket.socket] = set()
        self.peak = 0

    async def connect(self, rcvbuf: int | None = None) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        if rcvbuf:  # NOTE: before connect, so the window offered is small from the start
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.open.add(sock)
        self.peak = max(self.peak, len(self.open))
        try:
            await asyncio.get_running_loop().sock_connect(sock, (HOST, self.port))
        except BaseException:
            self.close(sock)
            raise
        return sock

    def close(self, sock: socket.socket) -> None:
        self.open.discard(sock)
        sock.close()

    def close_all(self) -> None:
        for sock in list(self.open):
            self.close(sock)


def request(path: str, key: str, body: bytes, content_length: int | None = None) -> bytes:
    """A POST's bytes; `content_length` larger than the body makes a sender that owes bytes."""
    length = len(body) if content_length is None else content_length
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    return head.encode() + body


def json_body(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


async def send(sock: socket.socket, data: bytes) -> None:
    await asyncio.get_running_loop().sock_sendall(sock, data)


async def read_head(
    sock: socket.socket, timeout: float, chunk: int = 65536
) -> tuple[int, dict[str, str], bytes] | None:
    """Status, headers and the bytes read past them; None if the connection ended first.
    `chunk`: the most read at once (small, for a reader that means to take nothing more)."""
    loop, buf = asyncio.get_running_loop(), b""
    deadline = time.monotonic() + timeout
    while HEAD_END not in buf:
        try:
            data = await asyncio.wait_for(
                loop.sock_recv(sock, chunk), max(0.0, deadline - time.monotonic())
            )
        except TimeoutError:
            raise
        except OSError:  # NOTE: a reset: the connection ended
            return None
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(HEAD_END)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest


async def read_answer(sock: socket.socket, timeout: float) -> tuple[int, dict[str, str]] | None:
    """A whole answer (its body read to its end and dropped); None if the connection ended
    before the status line or in its body. Raises TimeoutError past `timeout`."""
    got = await read_head(sock, timeout)
    if got is None:
        return None
    status, headers, rest = got
    loop = asyncio.get_running_loop()
    is_chunked = "content-length" not in headers  # NOTE: then the last chunk ends the body
    left = 0 if is_chunked else int(headers["content-length"]) - len(rest)
    tail = rest[-5:]
    while (tail[-5:] != b"0\r\n\r\n") if is_chunked else left > 0:
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 65536), timeout)
        except TimeoutError:
            raise
        except OSError:  # NOTE: a reset: the connection ended
            return None
        if not data:
            return None
        left -= len(data)
        tail = (tail + data)[-5:]
    return status, headers
