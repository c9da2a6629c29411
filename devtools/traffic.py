"""Steady background requests for a block: the stacks' health checks run under traffic."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import httpx


@contextlib.contextmanager
def steady_traffic(
    send: Callable[[], httpx.Response], rps: float, name: str = "traffic"
) -> Iterator[list[int]]:
    """Call `send` about `rps` times a second on a background thread for the block; yields the
    status codes seen so far (0: no answer)."""
    codes: list[int] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                codes.append(send().status_code)
            except httpx.HTTPError:
                codes.append(0)
            stop.wait(max(0.0, 1.0 / rps - (time.monotonic() - started)))

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield codes
    finally:
        stop.set()
        thread.join(timeout=70)


def scored_responses(gateway_url: str, key: str, scores: tuple[int, ...] = (-1, 1)) -> None:
    """One generation per score, each scored through POST /v1/feedback (feedback panels, alerts
    and searches need some); raises AssertionError when the gateway refuses either call."""
    auth = {"Authorization": f"Bearer {key}"}
    for score in scores:
        body = {"prompt": "rate me", "max_new_tokens": 2}
        answer = httpx.post(f"{gateway_url}/v1/generate", json=body, headers=auth, timeout=60)
        if answer.status_code != 200:
            raise AssertionError(f"generate answered {answer.status_code}: {answer.text[:200]}")
        feedback = {"response_id": answer.json()["id"], "score": score}
        done = httpx.post(f"{gateway_url}/v1/feedback", json=feedback, headers=auth, timeout=60)
        if done.status_code != 202:
            raise AssertionError(f"feedback answered {done.status_code}: {done.text[:200]}")
