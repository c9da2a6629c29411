"""Redaction: every planted value goes, clean text stays, counts never carry values."""

from __future__ import annotations

import pytest

from devtools.corpus import PII_KINDS, clean_corpus, pii_corpus
from log_pipeline.metrics import REDACTION_KINDS
from log_pipeline.redact import KINDS, luhn_ok, redact


def test_kinds_match_the_metric_label_set() -> None:
    assert set(KINDS) == set(REDACTION_KINDS) == set(PII_KINDS)


def test_every_planted_value_is_removed_and_counted_by_kind() -> None:
    corpus = pii_corpus(seed=7, size=1500)
    for entry in corpus:
        out, counts = redact(entry.text)
        for kind, value in entry.planted:
            assert value not in out, (kind, value)
            assert counts[kind] >= 1, (kind, value, out)
        assert all(v not in repr(dict(counts)) for _, v in entry.planted)


def test_clean_corpus_false_positive_rate_is_zero() -> None:
    corpus = clean_corpus(seed=11, size=3000)
    changed = [t for t in corpus if redact(t)[0] != t]
    rate = len(changed) / len(corpus)
    print(f"redaction false-positive rate on the clean corpus: {rate:.4%}")
    assert rate == 0.0, changed[:3]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("mail alice@example.com now", "email"),
        ("call (415) 555-2671", "phone"),
        ("card 4111 1111 1111 1111 ok", "card"),
        ("from 192.168.10.20 today", "ipv4"),
        ("host 2001:db8::8a2e:370:7334 up", "ipv6"),
        ("key sk-abcdefghijklmnopqrstuvwx", "api_key"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "bearer"),
        ("password=hunter2hunter2", "secret"),
    ],
)
def test_each_kind(text: str, kind: str) -> None:
    out, counts = redact(text)
    assert f"[REDACTED:{kind}]" in out
    assert dict(counts) == {kind: 1}


@pytest.mark.parametrize(
    "text",
    ["4111 1111 1111 1112", "order 12345678 shipped", "version 1.2.3", "at 12:30:45", "2026-05-06"],
)
def test_lookalikes_stay(text: str) -> None:
    assert redact(text)[0] == text


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [  # the cheap tests that let a text skip a pattern must never skip one that matches
        ("ſecret=hunter2hunter2", "ſecret=[REDACTED:secret]", {"secret": 1}),  # ſ matches s
        ("İ PassWord: hunter2hunter2", "İ PassWord: [REDACTED:secret]", {"secret": 1}),
        ("auth: BeArEr abcdefghijkl", "auth: BeArEr [REDACTED:bearer]", {"bearer": 1}),
        ("BEARER abcdefghij é", "BEARER [REDACTED:bearer] é", {"bearer": 1}),
        ("call ٤١٥-٥٥٥-٢٦٧١ now", "call [REDACTED:phone] now", {"phone": 1}),  # Arabic digits
        ("card ٤١١١١١١١١١١١١١١١ x", "card [REDACTED:card] x", {"card": 1}),
        ("x +1 (415) 555-2671", "x [REDACTED:phone]", {"phone": 1}),  # starts before a digit
        ("1.2.3.4 and 10.0.0.1", "[REDACTED:ipv4] and [REDACTED:ipv4]", {"ipv4": 2}),
        ("fe80::1 then ::", "[REDACTED:ipv6] then ::", {"ipv6": 1}),
        (
            "token: abcdefgh at a.b@c.io or 415.555.2671",
            "token: [REDACTED:secret] at [REDACTED:email] or [REDACTED:phone]",
            {"secret": 1, "email": 1, "phone": 1},
        ),
    ],
)
def test_exact_output_and_counts(text: str, expected: str, counts: dict[str, int]) -> None:
    out, found = redact(text)
    assert (out, dict(found)) == (expected, counts)


def test_luhn() -> None:
    assert luhn_ok("4111111111111111")
    assert not luhn_ok("4111111111111112")
    assert not luhn_ok("411111")  # too short for a card
