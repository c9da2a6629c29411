"""Steady background traffic: every call's status is recorded, a failed call as 0."""

from __future__ import annotations

import threading

import httpx

from devtools.traffic import steady_traffic


def test_codes_are_recorded_and_a_failure_is_zero() -> None:
    calls = 0
    enough = threading.Event()

    def send() -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 3:
            enough.set()
        if calls == 2:
            raise httpx.ConnectError("refused")
        return httpx.Response(200 if calls % 2 else 503)

    with steady_traffic(send, rps=200) as codes:
        assert enough.wait(30)
    assert codes[:3] == [200, 0, 200]
    assert len(codes) == calls  # nothing sent after the block
