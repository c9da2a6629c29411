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
