"""What the gateway and its sample-writer process say to each other over their pipes.

Each message is a frame: a 4-byte big-endian length, then a pickle. The gateway sends lists of
samples as plain tuples (tuples of str, int, float pickle in C, several times faster than the
dataclasses), and feedback in the same lists as a tuple tagged `FEEDBACK`; the writer answers
with its metric families. Both ends are this project's own processes, parent and child, so pickle
carries nothing from outside.
"""

from __future__ import annotations

import dataclasses
import mmap
import operator
import os
import pickle
import struct
from typing import Any

from tokenpulse.samples import Feedback, OutputSignals, RequestStats, Sample

_LENGTH = struct.Struct("!I")
_COUNT = struct.Struct("=Q")
MAX_FRAME = 1 << 30

# field order comes from the dataclasses themselves, so a new field cannot be left behind
_STATS_FIELDS = tuple(f.name for f in dataclasses.fields(RequestStats))
_OUTPUTS_AT = _STATS_FIELDS.index("outputs")
_stats_values = operator.attrgetter(*_STATS_FIELDS)
_signal_values = operator.attrgetter(*(f.name for f in dataclasses.fields(OutputSignals)))
_feedback_values = operator.attrgetter(*(f.name for f in dataclasses.fields(Feedback)))
FEEDBACK = "feedback"  # the tag of a feedback tuple (a sample's first item is a tuple)

WireSample = tuple[Any, ...]


class FrameError(Exception):
    """A frame that cannot be read (a torn or foreign stream); `messages` are the ones before it."""

    def __init__(self, reason: str, messages: list[Any]) -> None:
        super().__init__(reason)
        self.messages = messages


def to_wire(sample: Sample) -> WireSample:
    """A sample as nested tuples of plain values."""
    stats = list(_stats_values(sample.stats))
    stats[_OUTPUTS_AT] = tuple(map(_signal_values, sample.stats.outputs))
    return (tuple(stats), sample.prompts, sample.outputs, sample.params, sample.timestamp)


def feedback_to_wire(feedback: Feedback) -> WireSample:
    """Feedback as a tagged tuple of plain values."""
    return (FEEDBACK, *_feedback_values(feedback))


def is_feedback(values: WireSample) -> bool:
    """Whether a wire tuple is feedback rather than a sample."""
    return values[0] == FEEDBACK


def feedback_from_wire(values: WireSample) -> Feedback:
    """The feedback `feedback_to_wire` flattened."""
    return Feedback(*values[1:])


def from_wire(values: WireSample) -> Sample:
    """The sample `to_wire` flattened."""
    stats, prompts, outputs, params, timestamp = values
    fields = list(stats)
    fields[_OUTPUTS_AT] = [OutputSignals(*o) for o in fields[_OUTPUTS_AT]]
    return Sample(RequestStats(*fields), tuple(prompts), tuple(outputs), dict(params), timestamp)


def frame(payload: object) -> bytes:
    """One message, ready to write."""
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


class FrameReader:
    """Reassembles frames from reads of any size."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        """The messages completed by `data`, in order."""
        buf = self._buffer
        buf += data
        messages: list[Any] = []
        start = 0
        while len(buf) - start >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buf, start)
            if size > MAX_FRAME:
                raise FrameError(f"frame of {size} bytes: not a sample stream", messages)
            end = start + _LENGTH.size + size
            if len(buf) < end:
                break
            try:
                messages.append(pickle.loads(buf[start + _LENGTH.size : end]))
            except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad stream
                raise FrameError(f"unreadable frame: {exc}", messages) from exc
            start = end
        del buf[:start]
        return messages

    @property
    def partial(self) -> int:
        """Bytes of a frame not yet complete."""
        return len(self._buffer)


class HandledCount:
    """How many samples (and feedback) the writer has handled, in memory both processes map.

    The writer stores its running total after every read it handled; the gateway reads it once the
    writer has exited, to count what it handed over and the writer never handled. A pipe report
    (20 a second) woke a thread of the gateway for each, and each wake-up took the event loop's
    interpreter lock: that thread used about 1.3 us of the gateway's CPU per request."""

    def __init__(self, fd: int) -> None:
        if os.fstat(fd).st_size < _COUNT.size:
            os.ftruncate(fd, _COUNT.size)
        self._map = mmap.mmap(fd, _COUNT.size)  # shared: both see one page

    @classmethod
    def create(cls) -> tuple[HandledCount, int]:
        """A new zero count, and the descriptor to pass to the writer (the caller closes it)."""
        fd = os.memfd_create("tokenpulse-sample-writer-handled", os.MFD_CLOEXEC)
        return cls(fd), fd

    @property
    def value(self) -> int:
        """The total stored last."""
        return int(_COUNT.unpack_from(self._map, 0)[0])

    def store(self, total: int) -> None:
        """Store the running total."""
        _COUNT.pack_into(self._map, 0, total)
