"""What a streamed chat answer's chunks (Call.chunks) say, read for another API's stream: each
delta handed to `_delta`, an error after the start to `_error`, the usage and the finish reason
kept. Pure. (messages_stream.py and responses_stream.py write their events from it.)"""

from __future__ import annotations

from typing import Any


class ChunkReader:
    def __init__(self) -> None:
        self.totals: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.is_failed = False

    def feed(self, chunks: list[dict[str, Any]]) -> str:
        """The events of one hand-over's chunks."""
        out: list[str] = []
        for chunk in chunks:
            if "error" in chunk:  # NOTE: the answer failed after the stream began
                self.is_failed = True
                out.append(self._error(chunk["error"]))
                continue
            if chunk.get("usage"):
                self.totals = chunk["usage"]
            for choice in chunk.get("choices") or []:
                out += self._delta(choice.get("delta") or {})
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
        return "".join(out)

    def _delta(self, delta: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def _error(self, error: dict[str, Any]) -> str:
        raise NotImplementedError
