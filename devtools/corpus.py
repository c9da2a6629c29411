"""A seeded corpus of texts with planted personal data and secrets, and a clean one.

Redaction tests and the pipeline benchmark use it: every planted value must disappear, and clean
text (numbers that are not card numbers, dates, versions, prices) must come through unchanged.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

_WORDS = (
    "the model answered quickly and the batch finished before the deadline while the queue "
    "stayed short so nobody was paged tonight please review the summary of results below"
).split()


def _luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    digits = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        candidate = digits + check
        total = 0
        for i, c in enumerate(reversed(candidate)):
            d = int(c)
            if i % 2 == 1:
                d = d * 2 - 9 if d > 4 else d * 2
            total += d
        if total % 10 == 0:
            return candidate
    raise AssertionError("unreachable: one check digit always fits")


def _group(number: str, sep: str) -> str:
    return sep.join(number[i : i + 4] for i in range(0, len(number), 4))


def _pii_value(kind: str, rng: random.Random) -> str:
    r = rng
    if kind == "email":
        user = "".join(r.choices(string.ascii_lowercase, k=r.randint(3, 9)))
        domain = r.choice(["example.com", "mail.example.org", "corp.test"])
        return f"{user}.{r.randint(1, 99)}@{domain}"
    if kind == "phone":
        n = [r.randint(200, 999), r.randint(200, 999), r.randint(1000, 9999)]
        return r.choice(
            [f"({n[0]}) {n[1]}-{n[2]}", f"{n[0]}-{n[1]}-{n[2]}", f"+1 {n[0]} {n[1]} {n[2]}",
             f"+44 20 {n[2]} {r.randint(1000, 9999)}", f"{n[0]}.{n[1]}.{n[2]}"]
        )  # fmt: skip
    if kind == "card":
        prefix, length = r.choice([("4", 16), ("51", 16), ("37", 15), ("6011", 16)])
        number = _luhn_complete(prefix, length, r)
        return r.choice([number, _group(number, " "), _group(number, "-")])
    if kind == "ipv4":
        return ".".join(str(r.randint(1, 254)) for _ in range(4))
    if kind == "ipv6":
        groups = [f"{r.randint(0, 0xFFFF):x}" for _ in range(8)]
        return r.choice([":".join(groups), f"{groups[0]}:{groups[1]}::{groups[7]}"])
    if kind == "api_key":
        body = "".join(r.choices(string.ascii_letters + string.digits, k=32))
        return r.choice(
            [f"sk-{body}", f"tp_{body}", f"ghp_{body[:36]}", "AKIA" + body[:16].upper()]
        )
    if kind == "bearer":
        return "".join(r.choices(string.ascii_letters + string.digits + "-._", k=40))
    if kind == "secret":
        return "".join(r.choices(string.ascii_letters + string.digits + "!#%", k=r.randint(8, 20)))
    raise ValueError(f"unknown kind {kind!r}")


def _frame(kind: str, value: str, rng: random.Random) -> str:
    if kind == "bearer":
        return f"Authorization: Bearer {value}"
    if kind == "secret":
        return f"{rng.choice(['password', 'secret', 'api_key', 'token'])}={value}"
    return value


@dataclass(frozen=True, slots=True)
class PlantedText:
    """A text and the values planted in it, by kind."""

    text: str
    planted: tuple[tuple[str, str], ...]


PII_KINDS = (  # planting order (the seeded corpora depend on it); a test holds it to redact.KINDS
    "email",
    "phone",
    "card",
    "ipv4",
    "ipv6",
    "api_key",
    "bearer",
    "secret",
)


def _sentence(rng: random.Random, n: int = 8) -> str:
    return " ".join(rng.choices(_WORDS, k=n))


def pii_corpus(seed: int, size: int) -> list[PlantedText]:
    """`size` texts, each with one to three planted values among ordinary words."""
    rng = random.Random(seed)
    out = []
    for _ in range(size):
        planted = []
        parts = [_sentence(rng)]
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(PII_KINDS)
            value = _pii_value(kind, rng)
            planted.append((kind, value))
            parts.append(f"{_frame(kind, value, rng)} {_sentence(rng, 4)}")
        out.append(PlantedText(" ".join(parts), tuple(planted)))
    return out


def _clean_fragment(rng: random.Random) -> str:
    r = rng
    not_card = _luhn_complete("4", 16, r)
    not_card = not_card[:-1] + str((int(not_card[-1]) + 1) % 10)  # fails the Luhn check
    return r.choice(
        [
            f"order {r.randint(10000, 99999999)} shipped",
            f"on {r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} at "
            f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}",
            f"version {r.randint(0, 9)}.{r.randint(0, 20)}.{r.randint(0, 99)}",
            f"pi is about 3.{r.randint(1000, 99999)}",
            f"it costs ${r.randint(1, 999)}.{r.randint(0, 99):02d} "
            f"or {r.randint(1, 9)},{r.randint(100, 999)} yen",
            f"reference number {not_card}",
            f"account {_group(not_card, r.choice([' ', '-']))} is closed",
            f"we sold {r.randint(1, 999)},{r.randint(100, 999)},{r.randint(100, 999)} units",
            f"room {r.randint(100, 999)} floor {r.randint(1, 40)}",
            f"the ratio was {r.random():.4f} over {r.randint(2, 500)} runs",
            f"tokens {r.randint(1, 4096)} of {r.randint(4096, 8192)}",
            f"see section {r.randint(1, 12)}.{r.randint(1, 9)} and figure {r.randint(1, 30)}",
            "the key point is that the token budget and the password policy are documents",
        ]
    )


def clean_corpus(seed: int, size: int) -> list[str]:
    """`size` texts with numbers, dates, versions and prices but no personal data or secrets."""
    rng = random.Random(seed)
    return [f"{_sentence(rng)} {_clean_fragment(rng)} {_sentence(rng, 5)}" for _ in range(size)]
