"""The end of a generation's bytes: a last character cut short is dropped, not replaced.

A generation stopped by a length limit may end inside a multi-byte character. What an
incremental UTF-8 decoder would still be holding then is not text yet, and vLLM never sends it;
so a TokenPulse answer leaves it out, streamed or not. The model graph does the same in
TensorFlow (`serving/model/vocab.py`, `drop_partial_char`; a test holds the two to each other).
Bytes that can begin no character are a different thing: they stay, and become U+FFFD.
"""

from __future__ import annotations


def _second_byte_fits(lead: int, b: int) -> bool:
    """Whether `b` may follow `lead` in well-formed UTF-8 (the Unicode standard's table 3-7)."""
    low, high = {
        0xE0: (0xA0, 0xBF),
        0xED: (0x80, 0x9F),
        0xF0: (0x90, 0xBF),
        0xF4: (0x80, 0x8F),
    }.get(lead, (0x80, 0xBF))
    return low <= b <= high


def partial_char_len(data: bytes) -> int:
    """How many of `data`'s last bytes (0 to 3) begin a character well-formed so far but not
    whole, which more bytes could still complete."""
    tail = bytes(3 - min(len(data), 3)) + data[-3:]
    b3, b2, b1 = tail
    if 0xC2 <= b1 <= 0xF4:
        return 1
    if not 0x80 <= b1 <= 0xBF:
        return 0
    if 0xE0 <= b2 <= 0xF4 and _second_byte_fits(b2, b1):
        return 2
    if 0xF0 <= b3 <= 0xF4 and _second_byte_fits(b3, b2):
        return 3
    return 0
