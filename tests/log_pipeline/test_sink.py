"""The gateway-side sink: records land redacted, the loop never waits, overflow is counted."""

from __future__ import annotations

import asyncio
import json
import random
import threading
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry, generate_latest

from log_pipeline.settings import SinkSettings
from log_pipeline.sink import SpoolSink
from log_pipeline.spool import list_segments
from serving.gateway.app import Gateway
from serving.gateway.settings import GatewaySettings
from serving.gateway.sink import Sample, load_sink
from tests.log_pipeline.conftest import keep_all_rules, make_sample, write_samples
from tests.serving.gateway.helpers import auth
from tests.support.gateway import make_keys_file
from tokenpulse.testing.tfserving_standin import TfServingStandin


def _records(spool: Path) -> list[dict[str, object]]:
    return [json.loads(ln) for p in list_segments(spool) for ln in p.read_text().splitlines()]


def test_records_are_redacted_and_say_why(spool: Path) -> None:
    sink = write_samples(spool, [make_sample(1, prompt="mail bob@example.com", status=200),
                                 make_sample(2, status=502)])  # fmt: skip
    first, second = _records(spool)
    assert "bob@example.com" not in json.dumps(first)
    assert first["genai_sample"]["prompt"]["text"] == "mail [REDACTED:email]"  # type: ignore[index]
    assert first["genai_sample"]["sampling"]["reasons"] == ["head"]  # type: ignore[index]
    assert second["genai_sample"]["sampling"]["reasons"] == ["error"]  # type: ignore[index]
    assert sink.registry.get_sample_value("tokenpulse_spool_records_written_total") == 2
    assert (
        sink.registry.get_sample_value("tokenpulse_sampler_redactions_total", {"kind": "email"})
        == 1
    )


def test_handle_never_blocks_and_a_full_queue_is_counted(spool: Path) -> None:
    settings = SinkSettings.model_validate({"spool_dir": spool, "queue_size": 5})
    sink = SpoolSink(settings, rng=random.Random(0))
    sink.sampler.rules = keep_all_rules()
    gate = threading.Event()
    real_write = sink.write_batch

    def slow_write(samples: list[Sample]) -> int:
        gate.wait()
        return real_write(samples)

    sink.write_batch = slow_write  # type: ignore[method-assign]

    async def offer_all() -> None:
        for i in range(20):
            await sink.handle(make_sample(i))

    asyncio.run(asyncio.wait_for(offer_all(), 5))  # returns although the writer is stuck
    gate.set()
    sink.close()
    dropped = sink.registry.get_sample_value(
        "tokenpulse_spool_records_dropped_total", {"reason": "queue_full"}
    )
    written = sink.registry.get_sample_value("tokenpulse_spool_records_written_total")
    assert dropped is not None and written is not None
    # at most one batch (of at most five) taken by the stuck writer, five queued
    assert dropped + written == 20 and dropped >= 10


def test_hook_hands_the_gateway_registry_to_the_factory(
    spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENPULSE_SINK_SPOOL_DIR", str(spool))
    registry = CollectorRegistry()
    sink = load_sink("log_pipeline.sink:make_sink", registry=registry)
    assert isinstance(sink, SpoolSink)
    sink.close()
    assert b"tokenpulse_spool_records_dropped_total" in generate_latest(registry)


def test_gateway_keeps_answering_at_the_disk_cap_and_counts_drops(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    keys = make_keys_file(tmp_path / "keys.json", demo={})
    sink = SpoolSink(
        SinkSettings.model_validate({"spool_dir": spool, "cap_bytes": 4096}), rng=random.Random(0)
    )
    sink.sampler.rules = keep_all_rules()
    statuses: list[int] = []

    async def scenario(url: str) -> None:
        gateway = Gateway(
            GatewaySettings.model_validate(
                {"keys_file": tmp_path / "keys.json", "upstream_url": url, "access_log": False}
            ),
            sink=sink,
        )
        async with TestServer(gateway.app(), host="127.0.0.1") as server:
            async with aiohttp.ClientSession() as session:
                for i in range(30):
                    body = {"prompt": f"question {i}", "max_new_tokens": 3}
                    async with session.post(
                        str(server.make_url("/v1/generate")), json=body, headers=auth(keys["demo"])
                    ) as resp:
                        statuses.append(resp.status)
            await asyncio.sleep(0.2)

    with TfServingStandin() as upstream:
        asyncio.run(scenario(upstream.url))
    sink.close()
    assert statuses == [200] * 30
    dropped = sink.registry.get_sample_value(
        "tokenpulse_spool_records_dropped_total", {"reason": "disk_cap"}
    )
    written = sink.registry.get_sample_value("tokenpulse_spool_records_written_total")
    assert dropped and written and dropped + written == 30
    assert sum(p.stat().st_size for p in list_segments(spool)) <= 4096
    exposition = generate_latest(sink.registry).decode()
    assert f'tokenpulse_spool_records_dropped_total{{reason="disk_cap"}} {dropped}' in exposition
