"""Text boundaries of a stream: split UTF-8 characters and stop sequences across chunks."""

from __future__ import annotations

import pytest

from serving.gateway.textstream import TextStream, apply_stop, held_suffix


def _stream(chunks: list[bytes], stops: tuple[str, ...] = ()) -> list[str]:
    text = TextStream(stops)
    out = [text.feed(c) for c in chunks[:-1]]
    return [*out, text.feed(chunks[-1], final=True)]


def test_a_character_split_between_chunks_is_held_until_whole() -> None:
    raw = "a€b".encode()  # € is 3 bytes
    assert _stream([raw[:2], raw[2:3], raw[3:]]) == ["a", "", "€b"]


def test_a_character_cut_short_at_the_end_is_dropped_and_invalid_bytes_replaced() -> None:
    assert _stream([b"ok\xe2", b"\x82"]) == ["ok", ""]  # the model's text drops it too
    assert _stream([b"ok\xed\xa0"]) == ["ok\ufffd\ufffd"]  # begins no character: replaced
    assert _stream([b"ok\xff", b"!"]) == ["ok\ufffd", "!"]


def test_a_stop_split_between_chunks_stops_without_sending_its_first_half() -> None:
    pieces = _stream([b"abcd", b"EFgh"], stops=("dEF",))
    assert pieces == ["abc", ""] and "d" not in "".join(pieces)


def test_held_text_that_is_no_stop_is_sent_with_the_next_piece() -> None:
    assert _stream([b"abcd", b"Xyz"], stops=("dE",)) == ["abc", "dXyz"]
    assert _stream([b"abcd"], stops=("dE",)) == ["abcd"]  # the end flushes it


def test_the_earliest_stop_wins_as_for_unary() -> None:
    text = "one two three"
    for cut in range(1, len(text)):
        raw = text.encode()
        streamed = "".join(_stream([raw[:cut], raw[cut:]], stops=("three", "wo")))
        assert streamed == apply_stop(text, ("three", "wo"))[0] == "one t"


def test_a_stop_split_over_three_chunks() -> None:
    assert "".join(_stream([b"xxa", b"b", b"cyy"], stops=("abc",))) == "xx"


@pytest.mark.parametrize(
    ("text", "stops", "held"),
    [("abc", ("cd",), 1), ("abc", ("bcd", "cd"), 2), ("abc", ("x",), 0), ("abc", ("abc",), 0)],
)
def test_held_suffix(text: str, stops: tuple[str, ...], held: int) -> None:
    assert held_suffix(text, stops) == held
