"""`partial_char_len` against an oracle built from Unicode itself: every proper prefix of every
scalar value's UTF-8 encoding."""

from __future__ import annotations

import functools
import itertools

from tests.support.utf8 import all_tails
from tokenpulse.utf8 import partial_char_len


@functools.cache
def proper_prefixes() -> frozenset[bytes]:
    out = set()
    for cp in itertools.chain(range(0x80, 0xD800), range(0xE000, 0x110000)):
        raw = chr(cp).encode()
        out.update(raw[:k] for k in range(1, len(raw)))
    return frozenset(out)


def oracle(data: bytes) -> int:
    found = [k for k in (1, 2, 3) if len(data) >= k and data[-k:] in proper_prefixes()]
    assert len(found) <= 1  # a prefix of 2 or 3 ends in a continuation byte, which starts none
    return found[0] if found else 0


def test_a_cut_character_is_told_from_bytes_that_begin_none() -> None:
    wrong = {
        t: partial_char_len(b"x" + t)
        for t in all_tails()
        if partial_char_len(b"x" + t) != oracle(b"x" + t)
    }
    assert wrong == {}
    # spelled out: cut short, whole, and never valid
    assert partial_char_len("中".encode()[:2]) == 2 and partial_char_len("中".encode()) == 0
    assert partial_char_len("𐀀".encode()[:3]) == 3 and partial_char_len(b"ok\xc3") == 1
    assert partial_char_len(b"\xed\xa0") == 0  # a surrogate's start: no character begins so
    assert partial_char_len(b"\xe0\x80") == 0 and partial_char_len(b"\xff") == 0
    assert partial_char_len(b"") == 0
