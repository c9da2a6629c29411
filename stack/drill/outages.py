"""Drills that take the model server away: killed, crash-looping.

Each kills the model server's process (SIGKILL, as a crash would); `tokenpulse up` starts it
again after its restart delay, which is the fault's removal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from stack.drill.scenario import Expect, Log, Scenario
from stack.drill.target import Target

MODELSERVER = "modelserver"
START_S = 180.0  # a model server loads and warms both versions within this, on 2 busy cores


def restart_bound(target: Target) -> float:
    """How long `up` may take to bring a killed component back."""
    return target.state.restart_delay_s + START_S


class ModelServerKilled(Scenario):
    """The model server dies: one page, the outage itself, and it resolves once restarted."""

    name = "model-server-killed"
    summary = "SIGKILL the model server; up restarts it after its restart delay"
    expect = (Expect("TokenPulseTfServingDown"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        pid = target.signal(MODELSERVER, signal.SIGKILL)
        yield
        target.wait_restarted(MODELSERVER, pid, restart_bound(target))
        log.mark("restarted")


class CrashLoop(Scenario):
    """The model server keeps dropping out for short spells: the flapping alert pages.

    Compressed 60 times, "down 45 s in every 3 min" is under a second in every 3 s, and a real
    restart takes ~20 s here (TensorFlow import, load, warm-up): longer than the compressed
    window. So the spells are freezes (SIGSTOP, then SIGCONT): the process is there but answers
    nothing, its scrapes fail, `up` flips, as in a crash loop, and each spell is too short for
    TokenPulseTfServingDown's `for`.
    """

    name = "crash-loop"
    summary = "freeze the model server 4 s in every 5 s (SIGSTOP/SIGCONT) for 50 s"
    # what a crash loop truly does to callers may page too: the point is that something pages
    allow = (
        "TokenPulseTfServingDown", "TokenPulseGatewayAvailabilityBudgetBurn",
        "TokenPulseGatewayLatencyBudgetBurn", "TokenPulseGatewayTokenLatencyBudgetBurn",
    )  # fmt: skip
    # With 2 s scrapes (2 s timeout), 4 s frozen and 1 s thawed flips `up` at least 4 times in
    # every compressed 15 s window as Prometheus sees it live (a scrape's sample lands only when
    # it completes or times out); 4 s + 2 s dips to 3 at every freeze and resets the `for`.
    down_s = 4.0
    up_s = 1.0
    loop_s = 50.0
    fire_within_s = 60.0

    def expected(self, target: Target) -> tuple[Expect, ...]:
        names = [n for n in target.alert_rules() if "Flapping" in n or "CrashLoop" in n]
        return (Expect(names[0] if names else "TokenPulseTfServingFlapping"),)

    @contextlib.contextmanager
    def fault(self, target: Target, log: Log) -> Iterator[None]:
        stop = threading.Event()
        pid = target.pid(MODELSERVER)

        def loop() -> None:
            end = time.monotonic() + self.loop_s
            while time.monotonic() < end and not stop.is_set():
                os.kill(pid, signal.SIGSTOP)
                try:
                    stop.wait(self.down_s)
                finally:
                    os.kill(pid, signal.SIGCONT)
                stop.wait(self.up_s)

        thread = threading.Thread(target=loop, name="crash-loop", daemon=True)
        thread.start()
        try:
            yield  # the runner leaves once the page arrived (or its bound passed): loop over
        finally:
            stop.set()
            thread.join()
            os.kill(pid, signal.SIGCONT)
            log.mark("loop_end")
