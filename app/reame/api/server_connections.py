"""The connections the server accepts: at most max_connections open at once, each with a
small send buffer, and a body still coming in held to the request timeout.

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import asyncio
import socket
import time

from reame import metrics
from reame.api.sanic_kit import HttpProtocol, RequestTimeout, Stage

CLOSE_AFTER_408_SECONDS = 1.0
SEND_BUFFER_BYTES = 64 * 1024  # a few seconds of any stream's tokens


class CappedProtocol(HttpProtocol):
    """Sanic's HTTP protocol with a cap on the connections open at once (one more is closed as
    it comes, so idle or stalled clients cannot take every file descriptor and all memory), and
    a send buffer of SEND_BUFFER_BYTES: the kernel's own grows to megabytes, so a client that
    stopped reading would take thousands of tokens before its writes wait (and time out)."""

    max_connections = 0  # 0: no cap

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.max_connections and len(self.connections) >= self.max_connections:
            metrics.REFUSED_CONNECTIONS.inc()
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:  # NOTE: None for a connection closed as it came
            super().connection_lost(exc)

    def check_timeouts(self) -> None:
        # NOTE: Sanic reads a body in its handler stage, under the response timeout (days
        # here, for long silent answers): a body still coming in is held to the request's
        http = self._http
        is_receiving = http is not None and http.stage is Stage.HANDLER and http.request_body
        if self._task and is_receiving and time.monotonic() - self._time > self.request_timeout:
            http.exception = RequestTimeout("Request Timeout")
            self._task.cancel()
            # NOTE: Sanic answers 408 but then waits for the rest of the body: close it
            self.loop.call_later(CLOSE_AFTER_408_SECONDS, self.transport.abort)
            return
        super().check_timeouts()
