"""SIGTERM drains a real gateway process: the streams in flight finish (or, past the bound, end
with the typed error event), new requests are refused with a typed 503, readiness says draining,
and the process exits 0 within its bound. The upstream is the streaming stand-in, slowed down so
that each stream is still running when the signal arrives."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx

from serving.gateway.drain import LAST_WORDS_S
from tests.serving.gateway.fake_continue import FakeContinue, FakeState
from tests.serving.gateway.helpers import auth
from tests.support.gateway import GatewayProcess, make_keys_file, running_gateway

OUTPUT = b"abcdefghijklmnopqrst"  # 20 bytes: 10 chunks of 2
CHUNK = 2


class Stream(threading.Thread):
    """One streamed completion read to its end; `first` is set at its first event."""

    def __init__(self, url: str, key: str) -> None:
        super().__init__(daemon=True)
        self.url, self.key = url, key
        self.first = threading.Event()
        self.events: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        body = {"model": "gen", "prompt": "p", "max_tokens": len(OUTPUT), "stream": True}
        try:
            with httpx.stream(
                "POST", f"{self.url}/v1/completions", json=body, headers=auth(self.key),
                timeout=60,
            ) as resp:  # fmt: skip
                for line in resp.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(line[len("data: ") :])
                        self.first.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            self.first.set()

    def text(self) -> str:
        """The text the stream delivered."""
        return "".join(
            choice["text"] for e in self.events[:-1] for choice in json.loads(e).get("choices", [])
        )


def _streams_mid_flight(gw: GatewayProcess, key: str, n: int) -> list[Stream]:
    streams = [Stream(gw.url, key) for _ in range(n)]
    for s in streams:
        s.start()
    for s in streams:
        assert s.first.wait(10) and s.error is None, s.error
    return streams


def _gateway(up: FakeContinue, keys_file: Path, drain_timeout_s: float):  # type: ignore[no-untyped-def]
    return running_gateway(
        up.url, keys_file, stream_chunk_tokens=CHUNK, stream_first_chunk_tokens=CHUNK,
        stream_batch_rows=0, drain_timeout_s=drain_timeout_s,
    )  # fmt: skip


def _until(check, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


def test_sigterm_lets_every_stream_finish_refuses_new_requests_and_exits_0(
    tmp_path: Path,
) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    # 10 chunks of 0.25 s: each stream runs ~2.5 s, most of it after the signal
    with (
        FakeContinue(FakeState(default=OUTPUT, delay_s=0.25)) as up,
        _gateway(up, tmp_path / "keys.json", drain_timeout_s=30) as gw,
    ):
        assert httpx.get(f"{gw.url}/readyz").json()["status"] == "ready"
        streams = _streams_mid_flight(gw, key, 3)
        signalled = time.monotonic()
        gw.process.send_signal(signal.SIGTERM)

        _until(lambda: httpx.get(f"{gw.url}/readyz").status_code == 503)
        ready = httpx.get(f"{gw.url}/readyz")
        assert ready.json()["status"] == "draining" and ready.json()["draining"] is True
        refused = httpx.post(
            f"{gw.url}/v1/completions", json={"model": "gen", "prompt": "p"}, headers=auth(key)
        )
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "shutting_down"
        assert refused.headers["Connection"] == "close" and refused.headers["Retry-After"] == "1"
        assert any(s.is_alive() for s in streams)  # the refusal came while streams ran

        for s in streams:
            s.join(30)
            assert s.error is None, s.error
            assert s.events[-1] == "[DONE]"
            assert not any('"error"' in e for e in s.events)
            assert s.text() == OUTPUT.decode()
        assert gw.process.wait(30) == 0
        assert time.monotonic() - signalled < 30
        assert "gateway drained" in gw.log_path.read_text()


def test_a_stream_longer_than_the_bound_ends_with_the_typed_error_and_done(
    tmp_path: Path,
) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    bound = 1.0
    # 10 chunks of 0.6 s: ~6 s, far past the 1 s bound
    with (
        FakeContinue(FakeState(default=OUTPUT, delay_s=0.6)) as up,
        _gateway(up, tmp_path / "keys.json", drain_timeout_s=bound) as gw,
    ):
        (stream,) = _streams_mid_flight(gw, key, 1)
        signalled = time.monotonic()
        gw.process.send_signal(signal.SIGTERM)
        stream.join(30)
        assert stream.error is None, stream.error
        assert stream.events[-1] == "[DONE]"
        error = json.loads(stream.events[-2])["error"]
        assert error["code"] == "shutting_down"
        assert 0 < len(stream.text()) < len(OUTPUT)  # cut, after what it had sent
        assert gw.process.wait(30) == 0
        assert time.monotonic() - signalled < bound + LAST_WORDS_S + 2
