"""Bytes of a streamed generation in, text safe to send out: UTF-8 and stop sequences across chunks.

The model emits byte tokens, so a chunk may end inside a multi-byte character: the partial
character is held until the next chunk completes it (at the end, a character left cut short is
dropped, as the model's own `text` output drops it: `tokenpulse/utf8.py`). A stop sequence may
also be split between chunks: the longest tail of the text that is a prefix of some stop
sequence is held back, so when the rest arrives the stream stops without having sent the first
half; when the rest does not arrive, the held text is sent with the next piece or at the end.
"""

from __future__ import annotations

import codecs

from tokenpulse.utf8 import partial_char_len


def apply_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """Cut a whole `text` at the earliest stop sequence; True when one was found (unary)."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def held_suffix(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of some stop sequence."""
    best = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:n]):
                best = n
                break
    return best


class TextStream:
    """One output's text as it streams: `feed` bytes, get the text that may be sent now."""

    def __init__(self, stops: tuple[str, ...] = ()) -> None:
        self._stops = stops
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""  # decoded text not sent yet: it may begin a stop sequence
        self.sent = ""  # everything `feed` returned so far
        self.stopped = False  # a stop sequence was found; nothing more is sent

    def feed(self, data: bytes, final: bool = False) -> str:
        """The text that may be sent after `data`; `final` flushes what is held."""
        if self.stopped:
            return ""
        pending = self._held + self._decoder.decode(data)
        if final:
            held, _ = self._decoder.getstate()
            if held and partial_char_len(held) == len(held):
                self._decoder.reset()  # a character cut short: not text, never sent
            pending += self._decoder.decode(b"", True)
        cut = min((i for i in (pending.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self._held = pending[:cut], ""
        else:
            keep = 0 if final else held_suffix(pending, self._stops)
            out, self._held = pending[: len(pending) - keep], pending[len(pending) - keep :]
        self.sent += out
        return out
