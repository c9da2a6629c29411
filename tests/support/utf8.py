"""Byte strings that tell the UTF-8 tables' cases apart, for the end-of-text rule's tests."""

from __future__ import annotations

import itertools

# every class of byte the UTF-8 tables tell apart, at both ends of its range
EDGES = bytes(
    [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
     0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
)  # fmt: skip


def all_tails() -> list[bytes]:
    """Every string of one to three EDGES bytes (16,275)."""
    return [bytes(t) for n in (1, 2, 3) for t in itertools.product(EDGES, repeat=n)]
