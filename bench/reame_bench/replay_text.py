"""Seeded text for `reame bench --replay`'s traces: readable sentences, not word salad, so that
drafts from the prompt and from earlier answers meet text like a real client's. The same seed
gives the same text on any machine."""

from __future__ import annotations

import random

_PLACES = (
    "harbor office", "north depot", "city library", "river warehouse", "main store",
    "airport desk", "old mill", "south clinic", "market hall", "west station",
)  # fmt: skip
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_THINGS = (
    "parcels", "returns", "invoices", "refunds", "spare parts", "gift cards", "rentals",
    "repairs", "bookings", "deliveries", "memberships", "warranties",
)  # fmt: skip
_ACTIONS = (
    "check the order number first", "ask for the postcode", "offer a callback within a day",
    "quote the price list of this month", "explain the fee before going on",
    "never promise a date you cannot check", "point to the form on the website",
    "write down the customer's phone number", "say which office handles it",
    "keep the answer to two sentences",
)  # fmt: skip
_FIRST = ("Maria", "John", "Aiko", "Omar", "Lena", "Pedro", "Chen", "Fatima", "Igor", "Sara")
_LAST = ("Rossi", "Smith", "Tanaka", "Haddad", "Berg", "Silva", "Wang", "Khan", "Petrov", "Lund")
_CITIES = ("Turin", "Leeds", "Osaka", "Tunis", "Bergen", "Porto", "Xian", "Lahore", "Kazan", "Oslo")
_JOBS = ("nurse", "welder", "teacher", "pilot", "baker", "chemist", "clerk", "driver", "editor")
_SUBJECTS = (
    "The committee", "A local farmer", "The night shift", "Our supplier", "The museum",
    "A small team", "The council", "The new manager", "An old engineer", "The school",
)  # fmt: skip
_VERBS = (
    "reviewed", "repaired", "measured", "described", "moved", "priced", "tested", "painted",
    "counted", "rebuilt",
)  # fmt: skip
_OBJECTS = (
    "the copper roof", "the east bridge", "forty wooden crates", "the winter timetable",
    "the river pumps", "the harvest figures", "the library archive", "the signal tower",
    "the glass market", "the mountain road",
)  # fmt: skip
_WHEN = (
    "in early spring", "after the storm", "during the festival", "before the audit",
    "over two weeks", "last autumn", "at the end of the year", "in one long night",
)  # fmt: skip


def sentence(rng: random.Random) -> str:
    return (
        f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
        f"{rng.choice(_WHEN)}, and {rng.randint(2, 90)} people came to see it."
    )


def paragraph(rng: random.Random, num_words: int) -> str:
    out: list[str] = []
    while sum(len(s.split()) for s in out) < num_words:
        out.append(sentence(rng))
    return " ".join(out)


def policy(rng: random.Random, company: str, num_words: int) -> str:
    """A support assistant's system prompt of about `num_words` words: numbered rules."""
    out = [
        f"You are the customer assistant of {company}. Answer briefly and politely, in plain "
        "words. Follow these rules."
    ]
    rule = 0
    while sum(len(s.split()) for s in out) < num_words:
        rule += 1
        out.append(
            f"Rule {rule}: when a customer asks about {rng.choice(_THINGS)} at the "
            f"{rng.choice(_PLACES)}, {rng.choice(_ACTIONS)}."
        )
    return " ".join(out)


def question(rng: random.Random) -> str:
    forms = (
        "What time does the {place} open on {day}?",
        "Can I send {thing} from the {place} on {day}?",
        "Who handles {thing} at the {place}?",
        "How long do {thing} take at the {place}?",
        "Is the {place} closed for {thing} on {day}?",
        "What do I need to bring for {thing} to the {place}?",
    )
    return rng.choice(forms).format(
        place=rng.choice(_PLACES), day=rng.choice(_DAYS), thing=rng.choice(_THINGS)
    )


def person(rng: random.Random) -> tuple[str, dict[str, object]]:
    """A short staff memo about one person, and the record it holds."""
    record = {
        "name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        "age": rng.randint(19, 70),
        "city": rng.choice(_CITIES),
        "job": rng.choice(_JOBS),
    }
    memo = (
        f"Staff memo {rng.randint(100, 999)}. {record['name']} is {record['age']} years old and "
        f"works as a {record['job']} in our {record['city']} branch. {sentence(rng)} "
        f"{sentence(rng)}"
    )
    return memo, record


def tool_result(rng: random.Random) -> str:
    """What a tool returned, as JSON text."""
    return (
        f'{{"order_id": "A{rng.randint(1000, 9999)}", "status": "{rng.choice(_VERBS)}", '
        f'"office": "{rng.choice(_PLACES)}", "items": {rng.randint(1, 9)}, '
        f'"note": "{rng.choice(_ACTIONS)}"}}'
    )


def task(rng: random.Random) -> str:
    return (
        f"Customer {rng.choice(_FIRST)} {rng.choice(_LAST)} asks about {rng.choice(_THINGS)} "
        f"sent to the {rng.choice(_PLACES)} on {rng.choice(_DAYS)}. Find the order, check its "
        "status and tell the customer what happens next."
    )
