"""es-unreachable's judgement without a stack: the refusals, and the zero-loss check against the
ES stand-in and a real SQLite store (a missing sample, a second copy after a rollover, a loss
counter that moved). The drill itself runs in tests/stack/test_drill.py."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from devtools.standins.es import EsStandin
from log_pipeline.assets import DEFAULT_STREAM
from log_pipeline.outputs import Item
from log_pipeline.outputs.elasticsearch import ElasticsearchOutput, make_client
from log_pipeline.outputs.sqlite import SqliteOutput
from stack.config import Ports, StackConfig
from stack.drill.pipeline import EsUnreachable
from stack.drill.scenario import Log
from stack.drill.stores import SQLITE_FILE, loss_counters
from stack.drill.target import DrillError, Target
from stack.up.state import StackState, write_state

DEAD = "tokenpulse_shipper_records_dead_lettered_total"


@dataclass
class Metrics:
    """A /metrics page standing in for the shipper's and the gateway's."""

    values: dict[str, float] = field(default_factory=dict)

    def page(self) -> bytes:
        lines = [f'{name}{{output="elasticsearch"}} {v}' for name, v in self.values.items()]
        return ("\n".join(["# HELP x y", *lines]) + "\n").encode()


@pytest.fixture
def metrics() -> Iterator[tuple[Metrics, int]]:
    state = Metrics({DEAD: 0.0, "tokenpulse_spool_records_dropped_total": 3.0})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib's name
            body = state.page()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def es() -> Iterator[EsStandin]:
    with EsStandin(stream_patterns=("genai-samples-*",)) as standin:
        yield standin


def _target(run_dir: Path, metrics_port: int, es_url: str, proxy_port: int = 1) -> Target:
    (run_dir / "demo-key.txt").write_text("tp-key\n")
    ports = Ports(gateway_port=metrics_port, shipper_port=metrics_port)
    config = StackConfig(run_dir=run_dir, ports=ports, rules="compressed", restart_delay_s=20,
                         es_url=es_url, es_fault_proxy_port=proxy_port)  # fmt: skip
    write_state(StackState(config, os.getpid(), {}))
    return Target(run_dir)


def _items(names: str, at: float) -> list[Item]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(at))
    out = []
    for name in names:
        raw = json.dumps({"@timestamp": stamp, "event": {"id": f"id-{name}"}}).encode()
        out.append(Item(f"id-{name}", json.loads(raw), raw))
    return out


def test_the_drill_refuses_a_stack_without_elasticsearch_or_without_its_proxy(
    tmp_path: Path, metrics: tuple[Metrics, int]
) -> None:
    scenario = EsUnreachable()
    target = _target(tmp_path, metrics[1], es_url="")
    with pytest.raises(DrillError, match=r"^the stack ships samples to SQLite only: start up "
                       r"with --es-url \(or ES_URL\) and --es-fault-proxy-port"):  # fmt: skip
        with scenario.fault(target, Log()):
            pass
    target = _target(tmp_path, metrics[1], es_url="http://127.0.0.1:9", proxy_port=0)
    with pytest.raises(DrillError, match="directly: start up with --es-fault-proxy-port"):
        with scenario.fault(target, Log()):
            pass


def test_zero_loss_holds_when_elasticsearch_has_each_sample_once(
    tmp_path: Path, metrics: tuple[Metrics, int], es: EsStandin
) -> None:
    target = _target(tmp_path, metrics[1], es.url)
    scenario = EsUnreachable()
    scenario.counters = loss_counters(target)
    scenario.first_row = 0
    SqliteOutput(tmp_path / SQLITE_FILE).send(_items("x", time.time() - 60))  # before the drill
    scenario.first_row = 1
    scenario.down_at, scenario.back_at = time.time() - 30, time.time() + 30
    stored = _items("abcd", time.time())
    SqliteOutput(tmp_path / SQLITE_FILE).send(stored)
    ElasticsearchOutput(make_client(es.url), DEFAULT_STREAM).send(stored)
    log = Log()
    scenario.check(target, log)
    assert log.problems == []
    assert log.remarks == ["4 samples stored in SQLite during the drill (4 while Elasticsearch "
                           "was away): 4 in Elasticsearch exactly once"]  # fmt: skip


def test_zero_loss_names_a_missing_sample_a_second_copy_and_a_loss_counter(
    tmp_path: Path, metrics: tuple[Metrics, int], es: EsStandin
) -> None:
    state, port = metrics
    target = _target(tmp_path, port, es.url)
    scenario = EsUnreachable()
    scenario.drain_s = 1.0
    scenario.counters = loss_counters(target)
    scenario.down_at, scenario.back_at = time.time() - 30, time.time() - 20  # nothing in it
    stored = _items("abcd", time.time())
    SqliteOutput(tmp_path / SQLITE_FILE).send(stored)
    out = ElasticsearchOutput(make_client(es.url), DEFAULT_STREAM)
    out.send(stored[:3])  # d never arrives
    es.rollover(DEFAULT_STREAM)
    out.verify = False  # a resend that does not look first: b again, in the new backing index
    out.send(stored[1:2])
    assert es.copies(DEFAULT_STREAM)["id-b"] == 2
    state.values[DEAD] = 1.0
    log = Log()
    scenario.check(target, log)
    assert log.problems == [
        "no sample was stored while Elasticsearch was away: no proof",
        "1 of 4 samples SQLite stored are not in Elasticsearch (e.g. id-d)",
        "1 samples are in Elasticsearch more than once (e.g. id-b: 2 copies)",
        f"{DEAD} rose by 1",
    ]
