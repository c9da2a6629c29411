"""Redaction of personal data and secrets from sample texts, before anything touches disk.

Each match becomes `[REDACTED:<kind>]`; callers get the counts per kind, never the values.
Patterns run most-specific first: a bearer token or a card number would otherwise be eaten, in
part, by a looser pattern.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

_SECRET_WORDS = r"(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"


def luhn_ok(text: str) -> bool:
    """True when the digits of `text` are 13-19 long and pass the Luhn check."""
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _ipv6_ok(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return sum(c.isalnum() for c in text) >= 2


def _phone_ok(text: str) -> bool:
    digits = sum(c.isdigit() for c in text)
    return 10 <= digits <= 15


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] | None = None
    group: int = 0  # the group holding the value (the rest of the match stays)
    gate: re.Pattern[str] | None = None  # a cheap search that must hit before the full pattern


_HAS_DIGITS = re.compile(r"\d[\d .()+-]{8,}\d")  # ten digits with separators, at least


_RULES = (
    _Rule(
        "bearer",
        re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)"),
        group=1,
        gate=re.compile(r"(?i)bearer"),
    ),
    _Rule(
        "api_key",
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|tp_[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})"
        ),
        gate=re.compile(r"sk-|tp_|AKIA|gh[pousr]_|xox|AIza"),
    ),
    _Rule(
        "secret",
        re.compile(rf"(?i)\b{_SECRET_WORDS}\s*[=:]\s*[\"']?([^\s\"',;]{{6,}})"),
        group=1,
        gate=re.compile(r"[=:]"),
    ),
    _Rule(
        "email",
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        gate=re.compile("@"),
    ),
    _Rule(
        "card",
        re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"),
        valid=luhn_ok,
        gate=_HAS_DIGITS,
    ),
    _Rule(
        "ipv6",
        re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"),
        valid=_ipv6_ok,
        gate=re.compile(r"[0-9A-Fa-f]?:[0-9A-Fa-f]{0,4}:"),
    ),
    _Rule(
        "ipv4",
        re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w.])"),
        gate=re.compile(r"\d\.\d{1,3}\.\d"),
    ),
    _Rule(
        "phone",
        re.compile(
            r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
            r"\d{3,4}[ .-]\d{3,4}(?![\w-])(?![ .-]\d)"
        ),
        valid=_phone_ok,
        gate=_HAS_DIGITS,
    ),
)
KINDS = tuple(r.kind for r in _RULES)


def redact(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """The text with every match replaced by `[REDACTED:<kind>]`, and the counts per kind."""
    counts = Counter() if counts is None else counts
    for rule in _RULES:
        if rule.gate is not None and rule.gate.search(text) is None:
            continue

        def sub(m: re.Match[str], rule: _Rule = rule) -> str:
            value = m.group(rule.group)
            if rule.valid is not None and not rule.valid(value):
                return m.group(0)
            counts[rule.kind] += 1
            start, end = m.start(rule.group) - m.start(), m.end(rule.group) - m.start()
            whole = m.group(0)
            return f"{whole[:start]}[REDACTED:{rule.kind}]{whole[end:]}"

        text = rule.pattern.sub(sub, text)
    return text, counts


def redact_all(texts: tuple[str, ...] | list[str], counts: Counter[str]) -> list[str]:
    """Redact several texts, adding to one counter."""
    return [redact(t, counts)[0] for t in texts]
