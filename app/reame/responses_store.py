"""Stored responses of the Responses API: each one's conversation (the chat messages up to its
answer, its instructions apart) and the response itself, a checked file each under the state
directory (checked_files.py), so a call chained by `previous_response_id` sends only what is new,
across restarts. A response belongs to the key that made it: under another key its id is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reame.checked_files import CheckedFiles

_ID = re.compile(r"^resp_[0-9a-f]{24,64}$")


@dataclass(slots=True, frozen=True)
class Stored:
    response_id: str
    chain: str  # the first response's id of its chain: the conversation's state is kept by it
    conversation: list[dict[str, Any]]
    response: dict[str, Any]


class ResponseStore:
    def __init__(
        self, root: Path, max_count: int, max_bytes: int, max_per_owner: int | None = None
    ) -> None:
        """`max_per_owner`: responses one key may hold (None: no such bound)."""
        self._files = CheckedFiles(
            root, _ID, max_count, max_bytes, max_per_owner=max_per_owner, name_field="id"
        )

    def __len__(self) -> int:
        return len(self._files)

    @property
    def num_bytes(self) -> int:
        return self._files.num_bytes

    def put(self, stored: Stored, owner: str) -> bool:
        """Keep it (False: larger than the whole budget, or the disk refused; it is not kept)."""
        record = {
            "chain": stored.chain,
            "conversation": stored.conversation,
            "response": stored.response,
        }
        return self._files.put(stored.response_id, owner, record)

    def get(self, response_id: str, owner: str) -> Stored | None:
        record = self._files.get(response_id, owner)
        if record is None:
            return None
        conversation, response = record.get("conversation"), record.get("response")
        if not isinstance(conversation, list) or not isinstance(response, dict):
            return None
        return Stored(response_id, str(record.get("chain", "")), conversation, response)

    def delete(self, response_id: str, owner: str) -> bool:
        return self._files.delete(response_id, owner)
