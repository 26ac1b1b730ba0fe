"""`reame run MODEL`: chat in the terminal, streaming tokens as they come (like `ollama run`)."""

from __future__ import annotations

import argparse
import sys

from reame.cli.common import add_settings_flags, settings_from_args
from reame.engine.request import FinishEvent
from reame.runtime import Runtime, sampling_defaults
from reame.sampling import SamplingParams
from reame.service import Service, build_sampling

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
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = settings_from_args(args, default_log_level="warning")
    options = {"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed}
    params = build_sampling(sampling_defaults(loaded.settings), **options)
    prompt = args.prompt
    if prompt is None and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    with Runtime(loaded.settings) as runtime:
        chat = Chat(runtime.service, params, args.system)
        if prompt is not None:
            chat.say(prompt)
            return 0
        print(HELP_TEXT, file=sys.stderr)
        chat.loop()
    return 0


class Chat:
    """A conversation in the terminal. A model without a chat template gets plain completion."""

    def __init__(self, service: Service, params: SamplingParams, system: str | None) -> None:
        self.service, self.params, self.system = service, params, system
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
            prompt = self.service.chat_prompt(self.messages)
        else:
            prompt = self.service.text_prompt(text)
        parts: list[str] = []
        for event in self.service.stream(prompt, self.params):
            piece = event.text
            parts.append(piece)
            sys.stdout.write(piece)
            sys.stdout.flush()
            if isinstance(event, FinishEvent) and event.reason == "length":
                print("\n(stopped at max_tokens)", file=sys.stderr)
        sys.stdout.write("\n")
        if self.is_chat:
            self.messages.append({"role": "assistant", "content": "".join(parts)})
