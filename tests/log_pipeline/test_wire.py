"""The gateway-to-writer frames: samples survive the trip whole; a bad stream is an error."""

from __future__ import annotations

import pickle
import struct

import pytest

from log_pipeline.wire import (
    MAX_FRAME,
    FrameError,
    FrameReader,
    feedback_from_wire,
    feedback_to_wire,
    frame,
    from_wire,
    is_feedback,
    to_wire,
)
from tokenpulse.samples import Feedback, OutputSignals, RequestStats, Sample


def _sample(i: int) -> Sample:
    stats = RequestStats(
        request_id=f"req-{i}", route="completions", model="gen", version="7",
        version_label="canary", key_id="k", status=200, queue_wait_s=0.001, upstream_s=0.2,
        total_s=0.25, rate_limited="", shed=False, breaker_rejected=False,
        outputs=[OutputSignals(5, 3, "stop", False, 0.1, 1.5),
                 OutputSignals(5, 0, "length", True, 0.0, 0.0, truncated_prompt_tokens=2)],
    )  # fmt: skip
    return Sample(stats, ("a", "b ünïcode"), ("x", ""), {"temperature": 0.5, "seed": 3}, 1.7e9)


def test_a_sample_comes_back_equal() -> None:
    sample = _sample(1)
    assert from_wire(to_wire(sample)) == sample
    assert from_wire(pickle.loads(pickle.dumps(to_wire(sample)))) == sample


def test_frames_reassemble_from_reads_of_any_size() -> None:
    stream = b"".join(frame([to_wire(_sample(i))]) for i in range(5))
    reader = FrameReader()
    got = []
    for i in range(0, len(stream), 7):  # 7-byte reads cut through lengths and bodies
        got += reader.feed(stream[i : i + 7])
    assert [from_wire(batch[0]).stats.request_id for batch in got] == [f"req-{i}" for i in range(5)]
    assert reader.partial == 0


def test_a_cut_frame_waits_and_a_foreign_stream_is_an_error() -> None:
    whole = frame(["x"])
    reader = FrameReader()
    assert reader.feed(whole[:-1]) == [] and reader.partial == len(whole) - 1
    with pytest.raises(FrameError, match="not a sample stream"):
        FrameReader().feed(struct.pack("!I", MAX_FRAME + 1) + b"junk")
    with pytest.raises(FrameError, match="unreadable frame") as bad:
        FrameReader().feed(frame(["kept"]) + struct.pack("!I", 4) + b"junk")
    assert bad.value.messages == [["kept"]]  # what came before the bad frame is not lost


def test_feedback_rides_in_the_same_lists_as_samples() -> None:
    fb = Feedback("req-1", "cmpl-req-1", "k", -1.0, "thumbs", "meh 中文", 1.5, "gen", "7", "canary")
    batch = [to_wire(_sample(1)), feedback_to_wire(fb)]
    (decoded,) = FrameReader().feed(frame(batch))
    assert not is_feedback(decoded[0]) and is_feedback(decoded[1])
    assert from_wire(decoded[0]) == _sample(1)
    assert feedback_from_wire(decoded[1]) == fb
