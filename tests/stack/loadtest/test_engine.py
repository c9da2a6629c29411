"""The loops against a fake server that stalls: coordinated omission must not happen.

The fake server answers at once, except that from its 20th request on it holds every request
that arrives in the next second until that second is over. An honest open loop keeps sending on
schedule through the stall, and each stalled request's latency, measured from its intended send
time, contains the rest of the stall; a closed loop (the coordinated-omission shape) sends
nothing new while its request hangs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pytest
from aiohttp import web

from devtools.standins.background import BackgroundServer
from stack.loadtest.arrivals import RateProfile, schedule
from stack.loadtest.client import Client, TfServingRoute
from stack.loadtest.engine import (
    Limits,
    Monitor,
    Recording,
    SelfSample,
    closed_loop,
    health,
    open_loop,
)
from stack.loadtest.workload import Cycle, Workload

STALL_AFTER = 20
STALL_S = 1.0
RATE = 20.0


@dataclass
class StallingServer:
    """Answers predicts; stalls for STALL_S from its STALL_AFTER-th request."""

    arrivals: list[float] = field(default_factory=list)
    stall: tuple[float, float] | None = None  # (start, end), time.monotonic()

    async def predict(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        self.arrivals.append(now)
        if len(self.arrivals) == STALL_AFTER:
            self.stall = (now, now + STALL_S)
        if self.stall is not None and self.stall[0] <= now < self.stall[1]:
            await asyncio.sleep(self.stall[1] - now)
        await request.read()
        return web.json_response({"predictions": [{"prompt_tokens": 3, "output_tokens": 2}]})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self.predict)
        return app

    def received_during_stall(self) -> int:
        assert self.stall is not None, "the server never stalled"
        return sum(1 for t in self.arrivals if self.stall[0] <= t < self.stall[1])


@pytest.fixture
def server() -> Iterator[tuple[StallingServer, str]]:
    fake = StallingServer()
    with BackgroundServer(fake.app, name="stalling-server") as bg:
        yield fake, bg.url


def _client(url: str) -> Client:
    return Client(url, TfServingRoute("gen"), keys=[], timeout_s=10)


def test_open_loop_keeps_the_schedule_and_counts_the_stall(
    server: tuple[StallingServer, str],
) -> None:
    fake, url = server
    offsets = schedule(RateProfile(RATE, duration_s=3.0), "constant")

    async def go() -> Recording:
        async with _client(url) as client:
            return await open_loop(client, Workload(), offsets, 3.0, progress=None)

    rec = asyncio.run(go())
    assert fake.stall is not None
    stall_start, stall_end = fake.stall
    assert len(rec.outcomes) == len(offsets) == 60 and all(o.ok for o in rec.outcomes)
    # the schedule went on while requests hung: ~20 more arrived during the one-second stall (a
    # closed loop sends none); at least half, since a starved server thread reads some late (14
    # on a 2-core machine running other work flat out)
    assert fake.received_during_stall() >= 10
    # those meant for the stall's first half went out before it ended, not after it: half a
    # second of slack for a starved event loop (0.2 s was too little on a busy 2-core machine)
    first_half = stall_start + STALL_S / 2
    intended_in_stall = [o for o in rec.outcomes if stall_start <= o.intended < first_half]
    assert intended_in_stall and all(o.sent < stall_end for o in intended_in_stall)
    # each stalled request's latency holds the rest of the stall, from its intended send time
    for o in intended_in_stall:
        assert o.done >= stall_end
        assert o.latency_s >= stall_end - o.intended
    assert max(o.latency_s for o in rec.outcomes) >= STALL_S
    assert sum(1 for o in rec.outcomes if o.latency_s >= STALL_S / 2) >= 7


def test_a_closed_loop_sends_nothing_new_while_its_request_hangs(
    server: tuple[StallingServer, str],
) -> None:
    fake, url = server

    async def go() -> Recording:
        async with _client(url) as client:
            return await closed_loop(client, Workload(), 1, 2.0, progress=None)

    rec = asyncio.run(go())
    assert fake.stall is not None
    assert fake.received_during_stall() == 1  # why closed loops under-report a stall
    assert max(o.latency_s for o in rec.outcomes) >= STALL_S - 0.01


def test_the_generator_stops_itself_when_its_loop_stays_saturated() -> None:
    rec = Recording()
    monitor = Monitor(rec, Limits(max_cpu=0.9, max_lag_s=0.25, grace_s=3.0))
    assert monitor.judge(SelfSample(1, cpu=0.95, lag_s=0.0, in_flight=5)) is None
    assert monitor.judge(SelfSample(2, cpu=0.2, lag_s=0.0, in_flight=5)) is None  # recovered
    assert monitor.judge(SelfSample(3, cpu=0.2, lag_s=0.4, in_flight=5)) is None
    assert monitor.judge(SelfSample(4, cpu=0.99, lag_s=0.0, in_flight=5)) is None
    reason = monitor.judge(SelfSample(5, cpu=0.97, lag_s=0.3, in_flight=5))
    assert reason is not None and "saturated itself" in reason and len(rec.self_samples) == 5


def test_a_run_cut_short_records_its_unanswered_requests(
    server: tuple[StallingServer, str],
) -> None:
    fake, url = server
    offsets = schedule(RateProfile(RATE, duration_s=1.5), "constant")

    async def go() -> Recording:
        async with _client(url) as client:
            # drain_s 0: the stalled requests are still open when the schedule ends
            return await open_loop(client, Workload(), offsets, 1.5, drain_s=0.0, progress=None)

    rec = asyncio.run(go())
    assert len(rec.outcomes) == len(offsets)
    assert any(o.label == "unfinished" for o in rec.outcomes)


def test_a_closed_loop_can_send_a_number_of_requests_and_time_them(
    server: tuple[StallingServer, str],
) -> None:
    fake, url = server

    async def go() -> Recording:
        async with _client(url) as client:
            return await closed_loop(client, Cycle(4), 3, None, requests=7, progress=None)

    rec = asyncio.run(go())
    assert len(rec.outcomes) == len(fake.arrivals) == 7 and all(o.ok for o in rec.outcomes)
    assert rec.window_s == rec.end - rec.start > 0  # the window is the time the requests took
    with pytest.raises(ValueError, match="duration or a number"):
        asyncio.run(closed_loop(None, Cycle(4), 1, None, progress=None))  # type: ignore[arg-type]


def test_a_bench_keeps_going_past_a_saturated_generator_and_keeps_the_verdict() -> None:
    # limits every second breaks at once: the generator counts as saturated from its first sample
    strict = Limits(max_cpu=0.0, max_lag_s=0.0, grace_s=1.0)

    async def watch(limits: Limits) -> tuple[Recording, bool]:
        rec, stop = Recording(start=time.monotonic()), asyncio.Event()
        watching = asyncio.create_task(Monitor(rec, limits).run(stop))
        try:
            await asyncio.wait_for(stop.wait(), 1.6)
        except TimeoutError:
            pass
        stopped_itself = stop.is_set()
        stop.set()
        await watching
        return rec, stopped_itself

    async def both() -> list[tuple[Recording, bool]]:
        return list(await asyncio.gather(watch(strict), watch(replace(strict, stop=False))))

    (loadtest, stopped), (bench, bench_stopped) = asyncio.run(both())
    assert stopped and loadtest.saturated is not None  # the load test ends the run
    assert not bench_stopped and bench.saturated is not None  # a bench runs on, with the verdict
    verdict = health([Recording(), bench])
    assert verdict["saturated"] == bench.saturated and "saturated itself" in verdict["saturated"]
    assert verdict["max_cpu"] == max(x.cpu for x in bench.self_samples)
    assert health([]) == {"max_cpu": None, "max_loop_lag_s": None, "saturated": None}
