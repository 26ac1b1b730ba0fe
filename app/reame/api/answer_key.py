"""What an answer kept in the answer memory is found by: every field of a request that shapes its
output, listed here beside the request models (schemas.py), and what the server adds to them.
Pure.

Each field of a request model is either in OUTPUT_FIELDS (it shapes what the answer is: changed,
the answer is another one) or in OTHER_FIELDS (it shapes only how the same answer travels); a
test holds every field to one of the two, so a field added later cannot be forgotten. The key
also holds what the request became (its prompt tokens, whatever template and tools made them;
its sampling after the server's defaults; its thought's markers and budget), the model file's
fingerprint, the chat template in force, whose memory it is, and this build of Reame (its
source files' digest: a change to how an answer is computed or written is another key).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reame
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.service import Job

_COMMON_OUTPUT = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_p",
        "seed",
        "stop",
        "n",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "top_k",
        "min_p",
        "repetition_penalty",
        "ignore_eos",
        "session_id",  # a turn goes on from its session's state
        "best_of",
        "vote_on",
        "vote_early_stop",
        "response_format",
        "grammar",
    }
)
# NOTE: `model` names the model, whose file is in the key by its fingerprint; `speculation`
# changes only how fast (an answer is kept only where drafts left it as a lone request's)
_COMMON_OTHER = frozenset(
    {"model", "stream", "stream_options", "user", "metadata", "speculation", "answer_memory"}
)

OUTPUT_FIELDS: dict[type, frozenset[str]] = {
    ChatRequest: _COMMON_OUTPUT
    | {
        "messages",
        "max_completion_tokens",
        "logprobs",
        "top_logprobs",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "reasoning_budget",
        "chat_template_kwargs",
        "continue_final_message",
    },
    CompletionRequest: _COMMON_OUTPUT | {"prompt", "logprobs", "echo"},
}
OTHER_FIELDS: dict[type, frozenset[str]] = {
    ChatRequest: _COMMON_OTHER,
    CompletionRequest: _COMMON_OTHER,
}


@dataclass(slots=True, frozen=True)
class ServerSide:
    """What the server adds to a request that shapes its answer."""

    fingerprint: str  # the model file's (and what its states depend on)
    template: str  # the chat template in force
    scope: str  # whose memory: "" shared, else the key's digest (tenancy per_key)


def answer_key(
    body: ChatRequest | CompletionRequest,
    jobs: Sequence[Job],
    server: ServerSide,
    session_id: str | None,
    extra: object = None,
) -> str:
    """The memory's name for the answer of `body` made into `jobs`: 64 hex digits. `extra`:
    the server's settings the call took (its Conclave's size, temperature and vote rule)."""
    fields = OUTPUT_FIELDS[type(body)]
    record: dict[str, Any] = {
        "reame": code_digest(),
        "fingerprint": server.fingerprint,
        "template": hashlib.sha256(server.template.encode("utf-8", "surrogatepass")).hexdigest(),
        "scope": server.scope,
        "extra": repr(extra),
        "kind": type(body).__name__,
        "body": body.model_dump(mode="json", include=set(fields), by_alias=True),
        "session": session_id,
        "jobs": [
            {
                "prompt": job.prompt,
                "params": job.params.model_dump(mode="json", exclude={"speculation"}),
                "thought": repr(job.thought),
            }
            for job in jobs
        ],
    }
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def code_digest() -> str:
    """This build of Reame: its package's source files, by path and content."""
    root = Path(reame.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
