"""The metrics page's own-saturation gauge, through a real gateway process: requests holding an
upstream slot plus requests queued for one, over the slots plus the queue."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from devtools.standins.tfserving import TfServingStandin
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import running_gateway

SATURATION = "tokenpulse_gateway_saturation_ratio"


def test_saturation_counts_held_and_queued_requests_against_slots_plus_queue(
    keys_file: Path, keys: dict[str, str]
) -> None:
    with TfServingStandin() as up:
        with running_gateway(
            up.url, keys_file, max_concurrency=1, max_queue=3, max_queue_wait_s=10
        ) as gw:
            assert metric_value(gw.url, SATURATION) == 0.0
            up.state.delay_s = 1.5  # every predict holds its slot 1.5 s
            calls = [
                threading.Thread(
                    target=httpx.post,
                    args=(f"{gw.url}/v1/generate",),
                    kwargs={"json": {"prompt": "a"}, "headers": auth(keys["demo"]), "timeout": 30},
                )
                for _ in range(3)
            ]
            for call in calls:
                call.start()
            # one holds the slot, two wait for it: (1 + 2) / (1 + 3)
            deadline = time.monotonic() + 5
            while metric_value(gw.url, "tokenpulse_gateway_queued_requests") < 2:
                assert time.monotonic() < deadline, "the requests never queued"
                time.sleep(0.05)
            assert metric_value(gw.url, SATURATION) == 0.75
            for call in calls:
                call.join(30)
            assert metric_value(gw.url, SATURATION) == 0.0
