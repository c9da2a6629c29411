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
    """One kind. Without `valid`, `pattern` is substituted in C (`subn`): its group 1, when it has
    one, is the context that stays (a "Bearer " or "password=" prefix) and the rest is the value.
    With `valid`, each match is checked in Python and only the valid ones are replaced."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool] | None = None
    gate: Callable[[str], bool] | None = None  # a cheap test that must pass first


def _search(pattern: str) -> Callable[[str], bool]:
    found = re.compile(pattern).search
    return lambda text: found(text) is not None


_BEARER = re.compile(r"(?i)bearer").search
_HAS_DIGITS = _search(r"\d[\d .()+-]{8,}\d")  # ten digits with separators, at least


_RULES = (
    _Rule(
        "bearer",
        re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*"),
        gate=lambda text: _BEARER(text) is not None,
    ),
    _Rule(
        "api_key",
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|tp_[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})"
        ),
        gate=_search(r"sk-|tp_|AKIA|gh[pousr]_|xox|AIza"),
    ),
    _Rule(
        "secret",
        re.compile(rf"(?i)(\b{_SECRET_WORDS}\s*[=:]\s*[\"']?)[^\s\"',;]{{6,}}"),
        gate=lambda text: "=" in text or ":" in text,
    ),
    _Rule(
        "email",
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        gate=lambda text: "@" in text,
    ),
    _Rule(
        "card",
        re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"),
        valid=luhn_ok,
        gate=_search(r"\d(?:[ -]?\d){12}"),  # the 13 digits every card number has
    ),
    _Rule(
        "ipv6",
        re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"),
        valid=_ipv6_ok,
        gate=_search(r"[0-9A-Fa-f]?:[0-9A-Fa-f]{0,4}:"),
    ),
    _Rule(
        "ipv4",
        re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w.])"),
        gate=_search(r"\d\.\d{1,3}\.\d"),
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
_LABEL = {r.kind: f"[REDACTED:{r.kind}]" for r in _RULES}
# the group 1 context, when a pattern has one, stays in front of the label
_REPLACEMENT = {r.kind: ("\\g<1>" if r.pattern.groups else "") + _LABEL[r.kind] for r in _RULES}


def _replace_valid(rule: _Rule, valid: Callable[[str], bool], text: str) -> tuple[str, int]:
    """Replace the matches `valid` accepts (scanning as `re.sub` does); the text and how many."""
    pieces: list[str] = []
    last = 0
    for m in rule.pattern.finditer(text):
        if valid(m.group(0)):
            pieces += (text[last : m.start()], _LABEL[rule.kind])
            last = m.end()
    if not pieces:
        return text, 0
    pieces.append(text[last:])
    return "".join(pieces), len(pieces) // 2


# Something every pattern above needs (a superset of them all): one character-class scan and
# three substring tests pass most texts without trying eight gates.
_CANDIDATE = re.compile(r"[=:@\d_-]").search


def _candidate(text: str) -> bool:
    return (
        _CANDIDATE(text) is not None
        or "AKIA" in text
        or "AIza" in text
        or _BEARER(text) is not None
    )


def redact(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """The text with every match replaced by `[REDACTED:<kind>]`, and the counts per kind."""
    counts = Counter() if counts is None else counts
    if not _candidate(text):
        return text, counts
    for rule in _RULES:
        if rule.gate is not None and not rule.gate(text):
            continue
        if rule.valid is None:
            text, n = rule.pattern.subn(_REPLACEMENT[rule.kind], text)
        else:
            text, n = _replace_valid(rule, rule.valid, text)
        if n:
            counts[rule.kind] += n
    return text, counts


def redact_all(texts: tuple[str, ...] | list[str], counts: Counter[str]) -> list[str]:
    """Redact several texts, adding to one counter."""
    return [redact(t, counts)[0] for t in texts]
