"""`reame run MODEL`: chat in the terminal, streaming tokens as they come (like `ollama run`)."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from dataclasses import dataclass

from reame.autotune import DEFAULT_PARALLEL
from reame.cli.common import add_settings_flags, settings_from_args
from reame.conclave.answers import compile_rule
from reame.conclave.convene import convene
from reame.engine.request import Finish, FinishEvent
from reame.errors import ConfigError
from reame.runtime import Runtime, sampling_defaults
from reame.sampling import SamplingParams
from reame.service import Job, Service, build_sampling

HELP_TEXT = (
    "Type a message and press Enter. /clear forgets the conversation, /bye (or Ctrl-D) exits."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="chat with a model in the terminal (fetches it if needed)")
    add_settings_flags(p)
    p.add_argument("--prompt", "-p", help="answer this one prompt on stdout and exit")
    p.add_argument("--system", help="system message for the conversation")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument(
        "--best-of",
        type=int,
        metavar="N",
        help="the Conclave: sample N answers together and print the one most of them agree on",
    )
    p.add_argument("--vote-on", help="what is voted on: auto, number, choice, line, or a regex")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = settings_from_args(args, default_log_level="warning")
    options = {"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed}
    params = build_sampling(sampling_defaults(loaded.settings), **options)
    settings = loaded.settings
    best_of = args.best_of if args.best_of is not None else settings.best_of
    if best_of < 1:
        raise ConfigError(f"--best-of is {best_of}; it counts candidates, at least 1")
    if best_of > 1 and settings.parallel is None:
        settings = settings.model_copy(update={"parallel": max(best_of, DEFAULT_PARALLEL)})
    try:
        rule = compile_rule(args.vote_on or settings.vote_on)
    except ValueError as exc:
        raise ConfigError(f"--vote-on: {exc}") from None
    prompt = args.prompt
    if prompt is None and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    with Runtime(settings) as runtime:
        chat = Chat(
            runtime.service, params, args.system, Vote(best_of, rule, settings.conclave_temperature)
        )
        if prompt is not None:
            chat.say(prompt)
            return 0
        print(HELP_TEXT, file=sys.stderr)
        chat.loop()
    return 0


@dataclass(slots=True, frozen=True)
class Vote:
    best_of: int  # 1: no Conclave
    rule: str | re.Pattern[str]
    explore: float  # the candidates after the first sample at least this warm


class Chat:
    """A conversation in the terminal. A model without a chat template gets plain completion."""

    def __init__(
        self, service: Service, params: SamplingParams, system: str | None, vote: Vote
    ) -> None:
        self.service, self.params, self.system, self.vote = service, params, system, vote
        self.messages: list[dict[str, str]] = []
        self.is_chat = service.model.chat_template is not None
        if not self.is_chat:
            print(
                f"note: {service.model.name} has no chat template; each line is completed as "
                "plain text",
                file=sys.stderr,
            )
        self.clear()

    def clear(self) -> None:
        self.messages = [{"role": "system", "content": self.system}] if self.system else []

    def loop(self) -> None:
        while True:
            try:
                line = input(">>> ")
            except EOFError:
                print(file=sys.stderr)
                return
            if line.strip() == "/bye":
                return
            if line.strip() == "/clear":
                self.clear()
                continue
            if line.strip():
                try:
                    self.say(line)
                except KeyboardInterrupt:
                    print("\n(stopped)", file=sys.stderr)

    def say(self, text: str) -> None:
        if self.is_chat:
            self.messages.append({"role": "user", "content": text})
            prompt = self.service.chat.prompt(self.messages)
        else:
            prompt = self.service.text_prompt(text)
        answer = self._convene(prompt) if self.vote.best_of > 1 else self._stream(prompt)
        sys.stdout.write("\n")
        if self.is_chat:
            self.messages.append({"role": "assistant", "content": answer})

    def _convene(self, prompt: list[int]) -> str:
        """Print the winning candidate's text, and the tally on stderr."""
        n = self.vote.best_of
        job = Job(prompt, self.params)
        verdict = asyncio.run(
            convene(self.service, job, n, self.vote.rule, explore=self.vote.explore)
        )
        if (failed := verdict.failed) is not None:
            raise ConfigError(f"the Conclave failed: {failed.error or failed.reason}")
        sys.stdout.write(verdict.winner.text)
        t = verdict.tally
        votes = sorted(t.votes.items(), key=lambda kv: -len(kv[1]))
        tally = ", ".join(f"{a!r}: {len(v)}" for a, v in votes) or "no answers"
        print(
            f"\n(conclave of {n}: {tally}; {len(t.abstained)} without an answer, "
            f"{len(t.stopped)} stopped early)",
            file=sys.stderr,
        )
        return verdict.winner.text

    def _stream(self, prompt: list[int]) -> str:
        parts: list[str] = []
        for event in self.service.stream(prompt, self.params):
            piece = event.text
            parts.append(piece)
            sys.stdout.write(piece)
            sys.stdout.flush()
            if isinstance(event, FinishEvent) and event.reason == Finish.LENGTH:
                print("\n(stopped at max_tokens)", file=sys.stderr)
        return "".join(parts)
