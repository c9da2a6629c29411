"""The redaction as it was before issue 18 (a frozen copy): `bench redaction` compares against it.

Redaction of personal data and secrets from sample texts, before anything touches disk.

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


def _count_in(text: str, chars: bytes) -> int:
    """How many characters of `text` are among the ASCII `chars`, each non-ASCII character
    counted as one too: an upper bound that is exact for ASCII, at C speed (no Python loop)."""
    return len(text) - len(text.encode("ascii", "ignore").translate(None, chars))


_DIGITS = b"0123456789"


def _digits_at_most(text: str) -> int:
    """An upper bound of the `\\d` matches in `text` (`\\d` also matches other scripts' digits,
    so every non-ASCII character may be one). Redaction never adds a digit, so the bound taken
    before the first rule holds for every later one."""
    return _count_in(text, _DIGITS)


def _ipv6_ok(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return sum(c.isalnum() for c in text) >= 2


def _phone_ok(text: str) -> bool:
    # a phone match holds `\d` characters and ASCII separators only: its non-ASCII ones are digits
    return 10 <= _count_in(text, _DIGITS) <= 15


@dataclass(frozen=True, slots=True)
class _Rule:
    """One kind. Without `valid`, `pattern` is substituted in C (`subn`): its group 1, when it has
    one, is the context that stays (a "Bearer " or "password=" prefix) and the rest is the value.
    With `valid`, each match is checked in Python and only the valid ones are replaced.
    Texts with fewer than `min_digits` digits, or failing `gate` (a cheap test every text with a
    match passes), are not scanned; `scan_from`, when set, says where the first match can start
    (-1: nowhere), and the scan begins there (lookbehinds still see the text before it)."""

    kind: str
    pattern: re.Pattern[str]
    gate: Callable[[str], bool] | None = None
    min_digits: int = 0
    valid: Callable[[str], bool] | None = None
    scan_from: Callable[[str], int] | None = None


def _finds(pattern: str) -> Callable[[str], bool]:
    found = re.compile(pattern).search
    return lambda text: found(text) is not None


# Case-insensitive regex matching is wider than `str.lower` outside ASCII ("ſ" matches "s",
# "ı" matches "i"): the word tests on lower-cased text are only sound for ASCII text.
def _says_bearer(text: str) -> bool:
    return not text.isascii() or "bearer" in text.lower()


def _says_secret(text: str) -> bool:
    if "=" not in text and ":" not in text:
        return False
    if not text.isascii():
        return True
    low = text.lower()  # every secret word holds one of these
    return "key" in low or "token" in low or "secret" in low or "passw" in low or "pwd" in low


_TP_OR_GH = _finds(r"tp_|gh[pousr]_")


def _has_key_prefix(text: str) -> bool:
    return (
        "sk-" in text
        or "AKIA" in text
        or "AIza" in text
        or "xox" in text
        or ("_" in text and _TP_OR_GH(text))
    )


_IPV4_RUN = _finds(r"\d\.\d{1,3}\.\d")


def _starts_near(run: str, lead: int) -> Callable[[str], int]:
    """The `scan_from` of a kind each of whose matches holds a match of `run` that starts at
    most `lead` characters after its own start: where the first `run` is, less `lead` (-1 when
    there is none)."""
    search = re.compile(run).search

    def scan_from(text: str) -> int:
        found = search(text)
        return -1 if found is None else max(found.start() - lead, 0)

    return scan_from


_RULES = (
    _Rule(
        "bearer",
        re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*"),
        gate=_says_bearer,
    ),
    _Rule(
        "api_key",
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|tp_[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})"
        ),
        gate=_has_key_prefix,
    ),
    _Rule(
        "secret",
        re.compile(rf"(?i)(\b{_SECRET_WORDS}\s*[=:]\s*[\"']?)[^\s\"',;]{{6,}}"),
        gate=_says_secret,
    ),
    _Rule(
        "email",
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        gate=lambda text: "@" in text,
    ),
    _Rule(
        "card",
        re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"),
        min_digits=13,
        valid=luhn_ok,
        scan_from=_starts_near(r"\d(?:[ -]?\d){12}", 0),  # the 13 digits it starts with
    ),
    _Rule(
        "ipv6",
        re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"),
        gate=lambda text: text.count(":") >= 2,
        valid=_ipv6_ok,
        # its first two colons, and the hex digit before them (up to three more can lead)
        scan_from=_starts_near(r"[0-9A-Fa-f]?:[0-9A-Fa-f]{0,4}:", 3),
    ),
    _Rule(
        "ipv4",
        re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w.])"),
        gate=lambda text: text.count(".") >= 3 and _IPV4_RUN(text),
        min_digits=4,
    ),
    _Rule(
        "phone",
        re.compile(
            r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
            r"\d{3,4}[ .-]\d{3,4}(?![\w-])(?![ .-]\d)"
        ),
        min_digits=10,  # what _phone_ok asks for
        valid=_phone_ok,
        # ten digits and separators from its first digit on, which a "+" or "(" can lead
        scan_from=_starts_near(r"\d[\d .()+-]{8,}\d", 1),
    ),
)
KINDS = tuple(r.kind for r in _RULES)
_LABEL = {r.kind: f"[REDACTED:{r.kind}]" for r in _RULES}
# the group 1 context, when a pattern has one, stays in front of the label
_REPLACEMENT = {r.kind: ("\\g<1>" if r.pattern.groups else "") + _LABEL[r.kind] for r in _RULES}


def _replace_valid(rule: _Rule, valid: Callable[[str], bool], text: str) -> tuple[str, int]:
    """Replace the matches `valid` accepts (scanning as `re.sub` does); the text and how many.
    These patterns never match an empty string, so searching on from each match's end finds
    what `finditer` would, without its iterator."""
    first = 0 if rule.scan_from is None else rule.scan_from(text)
    if first < 0:
        return text, 0
    search = rule.pattern.search
    pieces: list[str] = []
    last = 0
    label = _LABEL[rule.kind]
    m = search(text, first)
    while m is not None:
        start, end = m.span()
        if valid(m.group()):
            pieces += (text[last:start], label)
            last = end
        m = search(text, end)
    if not pieces:
        return text, 0
    pieces.append(text[last:])
    return "".join(pieces), len(pieces) // 2


# Something every pattern above needs (a superset of them all): one character-class scan and
# three substring tests pass most texts without trying eight gates.
_CANDIDATE = re.compile(r"[=:@\d_-]").search


def _candidate(text: str) -> bool:
    return _CANDIDATE(text) is not None or "AKIA" in text or "AIza" in text or _says_bearer(text)


def redact(text: str, counts: Counter[str] | None = None) -> tuple[str, Counter[str]]:
    """The text with every match replaced by `[REDACTED:<kind>]`, and the counts per kind."""
    counts = Counter() if counts is None else counts
    if not _candidate(text):
        return text, counts
    digits = _digits_at_most(text)
    for rule in _RULES:
        if digits < rule.min_digits or (rule.gate is not None and not rule.gate(text)):
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
