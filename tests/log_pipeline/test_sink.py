"""The gateway-side sink: samples cross to the writer process and land redacted; the loop never
waits; what cannot be handed over, or is lost with a dead writer, is counted; the writer outlives
a killed gateway long enough to write what it was sent."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry, generate_latest

from devtools.standins.tfserving import TfServingStandin
from log_pipeline import sink as sink_module
from log_pipeline.settings import SinkSettings
from log_pipeline.sink import SpoolSink
from log_pipeline.spool import list_segments
from serving.gateway.app import Gateway
from serving.gateway.settings import GatewaySettings
from serving.gateway.sink import load_sink
from stack.cli import main
from tests.log_pipeline.conftest import make_sample
from tests.log_pipeline.support import wait_until
from tests.log_pipeline.test_writer import records
from tests.serving.gateway.helpers import auth
from tests.support.gateway import make_keys_file, running_gateway
from tokenpulse.procs import child_pids, free_port
from tokenpulse.samples import Feedback

Make = Callable[..., SpoolSink]


@pytest.fixture
def make(spool: Path, keep_all: Path) -> Iterator[Make]:
    """Builds sinks on the spool with keep-all rules; closes them all at the end."""
    made: list[SpoolSink] = []

    def build(**settings: object) -> SpoolSink:
        config = {"spool_dir": spool, "rules_file": keep_all, "writer_nice": 0, **settings}
        sink = SpoolSink(SinkSettings.model_validate(config))
        made.append(sink)
        return sink

    yield build
    for sink in made:
        sink.close()


def _value(sink: SpoolSink, name: str, **labels: str) -> float:
    return sink.registry.get_sample_value(name, labels) or 0.0


def test_samples_cross_to_the_writer_and_land_redacted(make: Make, spool: Path) -> None:
    sink = make()
    for i in range(300):
        sink.offer(make_sample(i, prompt=f"mail user{i}@example.com" if i % 3 == 0 else ""))
    sink.close()
    got = records(spool)
    assert [r["genai_sample"]["request_id"] for r in got] == [f"req-{i}" for i in range(300)]  # type: ignore[index]
    assert "@example.com" not in json.dumps(got)
    assert _value(sink, "tokenpulse_spool_records_written_total") == 300
    assert _value(sink, "tokenpulse_sampler_redactions_total", kind="email") == 100
    assert _value(sink, "tokenpulse_spool_queue_records") == 0


def test_feedback_crosses_in_line_and_keeps_a_skipped_request(
    make: Make, spool: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "keep-none.toml"
    rules.write_text("head_rate = 0.0\n[always_keep]\nerrors = false\nslow_s = 0\n"
                     "empty = false\nrepetition_ratio = 0\nmean_nll = 0\ntruncated = false\n"
                     "canary_labels = []\n")  # fmt: skip
    sink = make(rules_file=rules)
    sink.offer(make_sample(1, prompt="keep me"))
    sink.offer(make_sample(2, prompt="skip me"))
    fb = Feedback("req-1", "gen-req-1", "key-a", -1.0, "thumbs", "call 13812345678", 1.0, "gen")
    assert sink.offer_feedback(fb)
    asyncio.run(sink.feedback(Feedback("req-9", "gen-req-9", "key-a", 1.0, "thumbs")))
    sink.close()
    kept, late = records(spool)
    assert kept["genai_sample"]["prompt"]["text"] == "keep me"  # type: ignore[index]
    assert kept["genai_sample"]["feedback"]["comment"] == "call [REDACTED:phone]"  # type: ignore[index]
    assert late["genai_sample"]["kind"] == "feedback"  # type: ignore[index]
    assert _value(sink, "tokenpulse_sampler_feedback_total", outcome="promoted") == 1
    assert _value(sink, "tokenpulse_sampler_feedback_total", outcome="late") == 1
    assert _value(sink, "tokenpulse_spool_records_dropped_total", reason="write_error") == 0


def test_the_loop_never_waits_and_what_cannot_be_handed_over_is_counted(
    make: Make, spool: Path
) -> None:
    sink = make(queue_size=100)
    os.kill(sink.writer.proc.pid, signal.SIGSTOP)  # a writer that takes nothing: the pipe fills
    offered = 3000

    async def offer_all() -> float:
        for i in range(offered):
            await sink.handle(make_sample(i, prompt=f"{i} " + "x" * 2000))  # not one shared str
            await asyncio.sleep(0)  # as the gateway's dispatcher task does between samples
        await asyncio.sleep(2 * sink_module.BATCH_WAIT_S)
        return _value(sink, "tokenpulse_spool_queue_records")

    try:  # returns although the writer is stuck, with the queue full
        assert asyncio.run(asyncio.wait_for(offer_all(), 30)) == 100
    finally:
        os.kill(sink.writer.proc.pid, signal.SIGCONT)
    sink.close()
    dropped = _value(sink, "tokenpulse_spool_records_dropped_total", reason="queue_full")
    written = _value(sink, "tokenpulse_spool_records_written_total")
    assert dropped > 0 and dropped + written == offered
    assert len(records(spool)) == written


def test_a_dead_writer_is_replaced_and_gets_what_waited(
    make: Make, spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sink_module, "_RESTART_EVERY_S", 0.0)
    sink = make()
    first = sink.writer.proc
    os.kill(first.pid, signal.SIGSTOP)
    offered = 3000
    for i in range(offered):  # a full pipe, a frame cut in it, and frames queued behind it
        sink.offer(make_sample(i, prompt=f"{i} " + "x" * 2000))
    assert sink._head_sent  # the first queued frame is partly in the pipe
    cut = sink._frames[0][1]
    in_pipe = offered - sink.queued  # handed over whole (none here: the pipe holds part of one)
    first.kill()
    first.wait()
    sink.offer(make_sample(offered))
    sink.flush()
    assert sink.writer.proc is not first
    sink.close()
    written = _value(sink, "tokenpulse_spool_records_written_total")
    assert written == offered + 1 - in_pipe - cut
    assert len(records(spool)) == written
    lost = _value(sink, "tokenpulse_spool_records_dropped_total", reason="write_error")
    assert lost == cut + in_pipe and written + lost == offered + 1
    assert _value(sink, "tokenpulse_spool_writer_restarts_total") == 1


def test_samples_in_a_dying_writers_pipe_are_counted(
    make: Make, spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole frames already in the pipe (or read by the writer, not yet written) die with it:
    they are counted as write_error, not only logged."""
    monkeypatch.setattr(sink_module, "_RESTART_EVERY_S", 0.0)
    sink = make()
    for i in range(10):  # some written by the first writer
        sink.offer(make_sample(i))
    sink.flush()
    wait_until(lambda: _value(sink, "tokenpulse_spool_records_written_total") == 10, "written")
    first = sink.writer.proc
    os.kill(first.pid, signal.SIGSTOP)
    offered = 2000
    for i in range(offered):  # small samples: whole frames in the pipe, none cut
        sink.offer(make_sample(100 + i))
    sink.flush()
    assert sink.queued == 0 and not sink._head_sent
    first.kill()
    first.wait()
    sink.offer(make_sample(9999))
    sink.flush()
    assert sink.writer.proc is not first
    sink.close()
    assert _value(sink, "tokenpulse_spool_records_written_total") == 1  # the new writer's
    assert _value(sink, "tokenpulse_spool_records_dropped_total", reason="write_error") == offered
    assert len(records(spool)) == 11


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_the_writer_outlives_a_killed_gateway_and_writes_what_it_was_sent(
    tmp_path: Path, spool: Path, keep_all: Path
) -> None:
    keys = make_keys_file(tmp_path / "keys.json", demo={})
    env = {"TOKENPULSE_SINK_SPOOL_DIR": str(spool), "TOKENPULSE_SINK_RULES_FILE": str(keep_all)}
    with (
        TfServingStandin() as upstream,
        running_gateway(upstream.url, tmp_path / "keys.json", env=env,
                        sample_sink="log_pipeline.sink:make_sink") as gw,
    ):  # fmt: skip
        (writer,) = child_pids(gw.pid)
        os.kill(writer, signal.SIGSTOP)
        try:
            for i in range(20):
                resp = httpx.post(f"{gw.url}/v1/generate", json={"prompt": f"question {i}"},
                                  headers=auth(keys["demo"]))  # fmt: skip
                assert resp.status_code == 200

            def handed_over() -> bool:
                page = httpx.get(f"{gw.url}/metrics").text
                return "\ntokenpulse_spool_queue_records 0.0\n" in page

            wait_until(handed_over, "all samples in the pipe")
            os.kill(gw.pid, signal.SIGKILL)
        finally:
            os.kill(writer, signal.SIGCONT)
        wait_until(lambda: _gone(writer), "the writer to finish")
    assert len(records(spool)) == 20


def test_start_up_problems_stop_the_gateway_with_one_line(
    tmp_path: Path,
    spool: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_keys_file(tmp_path / "keys.json", demo={})
    argv = ["gateway", "--keys-file", str(tmp_path / "keys.json"), "--port", str(free_port()),
            "--upstream-url", "http://127.0.0.1:9", "--sample-sink",
            "log_pipeline.sink:make_sink"]  # fmt: skip
    bad_rules = tmp_path / "bad.toml"
    bad_rules.write_text("head_rate = 2.0\n")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    cases = [
        ({"TOKENPULSE_SINK_RULES_FILE": str(bad_rules)}, "head_rate"),
        ({"TOKENPULSE_SINK_SPOOL_DIR": str(blocked / "spool")}, "sample writer cannot start"),
        ({"TOKENPULSE_SINK_QUEUE_SIZE": "0"}, "TOKENPULSE_SINK_QUEUE_SIZE"),
    ]
    for env, message in cases:
        with monkeypatch.context() as m:
            for name, value in env.items():
                m.setenv(name, value)
            m.setenv("TOKENPULSE_SINK_SPOOL_DIR", env.get("TOKENPULSE_SINK_SPOOL_DIR", str(spool)))
            assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("tokenpulse gateway: error: sample sink: ") and message in err


def test_hook_hands_the_gateway_registry_to_the_factory(
    spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENPULSE_SINK_SPOOL_DIR", str(spool))
    registry = CollectorRegistry()
    sink = load_sink("log_pipeline.sink:make_sink", registry=registry)
    assert isinstance(sink, SpoolSink)
    sink.close()
    assert b"tokenpulse_spool_records_dropped_total" in generate_latest(registry)


def test_gateway_keeps_answering_at_the_disk_cap_and_counts_drops(
    tmp_path: Path, make: Make, spool: Path
) -> None:
    keys = make_keys_file(tmp_path / "keys.json", demo={})
    sink = make(cap_bytes=4096)
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
    dropped = _value(sink, "tokenpulse_spool_records_dropped_total", reason="disk_cap")
    written = _value(sink, "tokenpulse_spool_records_written_total")
    assert dropped and written and dropped + written == 30
    assert sum(p.stat().st_size for p in list_segments(spool)) <= 4096
    exposition = generate_latest(sink.registry).decode()
    assert f'tokenpulse_spool_records_dropped_total{{reason="disk_cap"}} {dropped}' in exposition


def test_the_writer_runs_in_a_session_of_its_own_niced_there_too(make: Make) -> None:
    sink = make(writer_nice=7)
    pid = sink.writer.proc.pid
    # the sink returns once the writer reported ready, which it does after it niced itself
    assert os.getsid(pid) == pid != os.getsid(0)
    # nice adds to the parent's, up to 19 (a suite's computing worker may already run at 19)
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 7)
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():  # a kernel that shares CPU by session first: the session is niced
        assert autogroup.read_text().split()[-1] == "7", autogroup.read_text()
