"""The loops that send load, the load generator's watch on itself, and the live progress line.

Open loop: a scheduler task wakes at each intended send time and starts the request as its own
task; it never waits for a response, so a stalled server cannot slow the arrivals, and each
latency runs from the intended time (a late send counts against the latency, never hides it).
Closed loop: `concurrency` workers, each sending its next request when the previous one ends,
for a duration or a number of requests. The loops take any sender (`Client`, or a bench's own)
and any source of Items (`Workload`, `Cycle`); `tokenpulse loadtest` and the benches share them.

The generator watches its own event-loop thread: CPU seconds per second and how late a periodic
tick wakes (event-loop lag). When either stays over its limit for `grace_s`, the recording says
so and the run stops (GeneratorSaturated in the load test): past that point it measures itself,
not the server. A bench keeps going to the end of its phase and prints the verdict instead.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from stack.loadtest.client import Outcome
from stack.loadtest.stats import quantiles
from stack.loadtest.workload import Item

TICK_S = 0.1


class LoadtestError(Exception):
    """A load test that cannot go on; the message is one line for the user."""


class GeneratorSaturated(LoadtestError):
    """The load generator's own CPU or event loop was the bottleneck."""


@dataclass(frozen=True)
class Limits:
    """When the generator gives up on itself."""

    max_cpu: float = 0.9  # CPU seconds per second of the event-loop thread
    max_lag_s: float = 0.25  # how late a tick may wake
    grace_s: float = 3.0  # how long either may stay over before the run stops
    max_in_flight: int = 4096  # more at once: counted as "generator_limit", not sent
    stop: bool = True  # False: record the verdict and run to the end (the benches)


class Sender(Protocol):
    """Sends one request now (`Client`, or a bench's own); never raises for what the server or
    the network does."""

    async def send(self, item: Item, intended: float) -> Outcome: ...


class Source(Protocol):
    """What to ask next (`Workload`, `Cycle`)."""

    def next(self) -> Item: ...


@dataclass
class SelfSample:
    """One second of the generator's own health."""

    t: float  # seconds from the run's start
    cpu: float
    lag_s: float
    in_flight: int


@dataclass
class Recording:
    """What a loop recorded."""

    outcomes: list[Outcome] = field(default_factory=list)
    start: float = 0.0  # time.monotonic() of the run's start
    start_unix: float = 0.0
    end: float = 0.0
    window_s: float = 0.0  # the schedule's (or the closed loop's) length
    self_samples: list[SelfSample] = field(default_factory=list)
    saturated: str | None = None  # why the generator stopped itself
    in_flight: int = 0


def health(recs: Sequence[Recording]) -> dict[str, Any]:
    """The generator's own figures over recordings: its worst second, and the first verdict."""
    samples = [x for rec in recs for x in rec.self_samples]
    return {
        "max_cpu": max((x.cpu for x in samples), default=None),
        "max_loop_lag_s": max((x.lag_s for x in samples), default=None),
        "saturated": next((rec.saturated for rec in recs if rec.saturated), None),
    }


class Monitor:
    """Samples the event-loop thread's CPU and lag; `check()` says when it is saturated."""

    def __init__(self, rec: Recording, limits: Limits) -> None:
        self.rec, self.limits = rec, limits
        self._over_since: float | None = None

    def judge(self, sample: SelfSample) -> str | None:
        """Record a sample; the reason once the limits are exceeded for the grace period."""
        self.rec.self_samples.append(sample)
        over = sample.cpu >= self.limits.max_cpu or sample.lag_s >= self.limits.max_lag_s
        if not over:
            self._over_since = None
            return None
        if self._over_since is None:
            self._over_since = sample.t
        if sample.t - self._over_since + 1.0 >= self.limits.grace_s:
            return (
                f"the load generator saturated itself at {sample.t:.0f}s (its event loop used "
                f"{sample.cpu:.0%} of a core, woke {sample.lag_s * 1000:.0f} ms late; limits "
                f"{self.limits.max_cpu:.0%}, {self.limits.max_lag_s * 1000:.0f} ms): results past "
                "this point measure the generator, not the server; lower the rate or spread the "
                "load over more generators"
            )
        return None

    async def run(self, stop: asyncio.Event) -> None:
        """Sample once a second until stopped or saturated (then set rec.saturated and stop)."""
        cpu0, wall0 = time.thread_time(), time.monotonic()
        worst = 0.0
        while not stop.is_set():
            expected = time.monotonic() + TICK_S
            try:  # a tick, or at once when the run ends: its window closes with the load
                await asyncio.wait_for(stop.wait(), TICK_S)
            except TimeoutError:
                pass
            worst = max(worst, time.monotonic() - expected)
            now = time.monotonic()
            if now - wall0 < 1.0:
                continue
            cpu = (time.thread_time() - cpu0) / (now - wall0)
            sample = SelfSample(now - self.rec.start, cpu, worst, self.rec.in_flight)
            reason = self.judge(sample)
            cpu0, wall0, worst = time.thread_time(), now, 0.0
            if reason is not None:
                self.rec.saturated = self.rec.saturated or reason
                if self.limits.stop:
                    stop.set()


class Progress:
    """One status line a second (a TTY rewrites it; elsewhere every five seconds)."""

    def __init__(self, rec: Recording, total_s: float, label: str, out: TextIO | None) -> None:
        self.rec, self.total_s, self.label, self.out = rec, total_s, label, out
        self._tty = bool(out is not None and out.isatty())

    def line(self, now: float) -> str:
        """The current status: elapsed, rate, in-flight, recent p50/p99, errors by code."""
        rec = self.rec
        recent = [o for o in rec.outcomes if o.done >= now - 5.0]
        q = quantiles([o.latency_s for o in recent if o.ok], (0.5, 0.99))
        sent = sum(1 for o in rec.outcomes if o.sent >= now - 5.0) / 5.0
        bad = Counter(o.label for o in rec.outcomes if not o.ok)
        errs = " ".join(f"{k}×{v}" for k, v in sorted(bad.items())) or "none"

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v * 1000:.0f}ms"

        return (
            f"[{self.label} {now - rec.start:5.1f}/{self.total_s:.0f}s] rate {sent:.1f}/s "
            f"in-flight {rec.in_flight} p50 {ms(q['p50'])} p99 {ms(q['p99'])} "
            f"ok {sum(1 for o in rec.outcomes if o.ok)} errors {errs}"
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Print until stopped."""
        if self.out is None:
            return
        every = 1.0 if self._tty else 5.0
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                self.print()

    def print(self, final: bool = False) -> None:
        """Write the line now."""
        if self.out is None:
            return
        text = self.line(time.monotonic())
        if self._tty:
            self.out.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self.out.write(text + "\n")
        self.out.flush()


async def _send(client: Sender, item: Item, intended: float, rec: Recording) -> None:
    rec.in_flight += 1
    try:
        rec.outcomes.append(await client.send(item, intended))
    except asyncio.CancelledError:  # still unanswered when the run ended: never silently lost
        now = time.monotonic()
        rec.outcomes.append(Outcome(intended, intended, now, 0, "unfinished", 0, 0, None))
        raise
    finally:
        rec.in_flight -= 1


async def _drain(tasks: set[asyncio.Task[None]], timeout_s: float) -> None:
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _supervised(
    rec: Recording,
    limits: Limits,
    body: Callable[[asyncio.Event], object],
    total_s: float,
    label: str,
    progress: TextIO | None,
) -> Recording:
    stop = asyncio.Event()
    rec.start, rec.start_unix = time.monotonic(), time.time()
    show = Progress(rec, total_s, label, progress)
    helpers = [
        asyncio.create_task(Monitor(rec, limits).run(stop)),
        asyncio.create_task(show.run(stop)),
    ]
    try:
        await body(stop)  # type: ignore[misc]
    finally:
        rec.end = time.monotonic()  # before the helpers' last tick: the window is the load's
        stop.set()
        await asyncio.gather(*helpers, return_exceptions=True)
        show.print(final=True)
    return rec


async def open_loop(
    client: Sender,
    workload: Source,
    offsets: Sequence[float],
    window_s: float,
    *,
    limits: Limits = Limits(),
    drain_s: float = 30.0,
    label: str = "open",
    progress: TextIO | None = sys.stderr,
) -> Recording:
    """Send at `offsets` (seconds from start) whatever the responses do; wait `drain_s` at most
    for the last answers; a request over `max_in_flight` is recorded, not sent."""
    rec = Recording(window_s=window_s)
    tasks: set[asyncio.Task[None]] = set()

    async def body(stop: asyncio.Event) -> None:
        for offset in offsets:
            intended = rec.start + offset
            delay = intended - time.monotonic()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass
            if stop.is_set():
                break
            item = workload.next()
            if rec.in_flight >= limits.max_in_flight:
                now = time.monotonic()
                rec.outcomes.append(Outcome(intended, now, now, 0, "generator_limit"))
                continue
            task = asyncio.create_task(_send(client, item, intended, rec))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await _drain(set(tasks), 0.0 if stop.is_set() else drain_s)

    return await _supervised(rec, limits, body, window_s, label, progress)


async def closed_loop(
    client: Sender,
    workload: Source,
    concurrency: int,
    duration_s: float | None,
    *,
    requests: int | None = None,
    limits: Limits = Limits(),
    drain_s: float = 30.0,
    label: str = "closed",
    progress: TextIO | None = sys.stderr,
) -> Recording:
    """`concurrency` workers back to back for `duration_s`, or until `requests` were sent (then
    the window is the time they took); each latency runs from its send."""
    if duration_s is None and requests is None:
        raise ValueError("a closed loop needs a duration or a number of requests")
    rec = Recording(window_s=duration_s or 0.0)
    left = [requests if requests is not None else -1]

    def more() -> bool:
        if left[0] == 0:
            return False
        left[0] -= 1
        return duration_s is None or time.monotonic() < rec.start + duration_s

    async def worker(stop: asyncio.Event) -> None:
        while not stop.is_set() and more():
            await _send(client, workload.next(), time.monotonic(), rec)

    async def body(stop: asyncio.Event) -> None:
        workers = {asyncio.create_task(worker(stop)) for _ in range(concurrency)}
        if duration_s is None:
            await asyncio.gather(*workers)
        else:
            await _drain(workers, duration_s + drain_s)

    await _supervised(rec, limits, body, duration_s or 0.0, label, progress)
    if duration_s is None:
        rec.window_s = rec.end - rec.start
    return rec
