"""Bounded concurrency: a bounded queue with a bounded wait, and fast 503s beyond it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.admission import Admission, Shed
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import running_gateway


def test_slots_queue_and_shed() -> None:
    async def scenario() -> None:
        adm = Admission(limit=1, max_queue=1, max_wait_s=5.0)
        await adm.acquire()
        waiter = asyncio.create_task(adm.acquire())
        await asyncio.sleep(0)
        assert adm.queued == 1
        with pytest.raises(Shed, match="queue full"):
            await adm.acquire()
        adm.release()  # hands the slot to the waiter
        await waiter
        assert adm.in_use == 1 and adm.queued == 0
        adm.release()
        assert adm.in_use == 0

    asyncio.run(scenario())


def test_wait_is_bounded() -> None:
    async def scenario() -> None:
        adm = Admission(limit=1, max_queue=10, max_wait_s=0.05)
        await adm.acquire()
        with pytest.raises(Shed, match="wait"):
            await adm.acquire()
        with pytest.raises(Shed, match="wait"):
            await adm.acquire(timeout_s=0.0)  # no deadline left
        assert adm.queued == 0
        adm.release()
        await adm.acquire()  # the timed-out waiters did not keep the slot

    asyncio.run(scenario())


def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    async def scenario() -> None:
        adm = Admission(limit=1, max_queue=10, max_wait_s=5.0)
        await adm.acquire()
        waiter = asyncio.create_task(adm.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        adm.release()
        assert adm.in_use == 0 and adm.queued == 0

    asyncio.run(scenario())


def test_overload_sheds_with_503_and_retry_after(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    standin.state.delay_s = 1.0
    settings = {"max_concurrency": 1, "max_queue": 1, "max_queue_wait_s": 0.2}
    with running_gateway(standin.url, keys_file, **settings) as gw:

        def call(_: int) -> httpx.Response:
            return httpx.post(
                f"{gw.url}/v1/generate",
                json={"prompt": "hi", "max_new_tokens": 2},
                headers=auth(keys["demo"]),
                timeout=10,
            )

        with ThreadPoolExecutor(4) as pool:
            responses = list(pool.map(call, range(4)))
        codes = sorted(r.status_code for r in responses)
        # one runs; the rest are refused (queue full at once, or after the 0.2 s wait)
        assert codes == [200, 503, 503, 503]
        shed = [r for r in responses if r.status_code == 503]
        assert all(r.json()["error"]["code"] == "overloaded" for r in shed)
        assert all(r.headers["Retry-After"] == "1" for r in shed)
        assert metric_value(gw.url, "tokenpulse_gateway_shed_total") == 3
    assert standin.predict_calls() == 1
