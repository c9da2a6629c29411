"""Server-side figures from /metrics snapshots, PromQL from the mixin's names, disagreement."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from devtools.standins.background import BackgroundServer
from stack.loadtest.prom import (
    ServerView,
    batch_totals,
    disagreement,
    figures,
    histogram_quantile,
    parse_metrics,
    prometheus_exprs,
    quantile_delta,
    scrape,
    total,
)

BEFORE = """
# TYPE :tensorflow:serving:batching_session:processed_batch_size histogram
:tensorflow:serving:batching_session:processed_batch_size_sum 10
:tensorflow:serving:batching_session:processed_batch_size_count 10
:tensorflow:serving:batching_session:queuing_latency_bucket{le="1000"} 5
:tensorflow:serving:batching_session:queuing_latency_bucket{le="+Inf"} 10
:tensorflow:serving:batching_session:queuing_latency_sum 20000
:tensorflow:serving:batching_session:queuing_latency_count 10
tokenpulse_gateway_request_duration_seconds_sum{code="200",model="gen"} 1.0
tokenpulse_gateway_request_duration_seconds_count{code="200",model="gen"} 10
tokenpulse_gateway_request_duration_seconds_sum{code="503",model="gen"} 9.0
tokenpulse_gateway_request_duration_seconds_count{code="503",model="gen"} 1
"""
AFTER = """
:tensorflow:serving:batching_session:processed_batch_size_sum 50
:tensorflow:serving:batching_session:processed_batch_size_count 20
:tensorflow:serving:batching_session:queuing_latency_bucket{le="1000"} 15
:tensorflow:serving:batching_session:queuing_latency_bucket{le="+Inf"} 20
:tensorflow:serving:batching_session:queuing_latency_sum 40000
:tensorflow:serving:batching_session:queuing_latency_count 20
tokenpulse_gateway_request_duration_seconds_sum{code="200",model="gen"} 3.0
tokenpulse_gateway_request_duration_seconds_count{code="200",model="gen"} 30
tokenpulse_gateway_request_duration_seconds_sum{code="503",model="gen"} 99.0
tokenpulse_gateway_request_duration_seconds_count{code="503",model="gen"} 2
tokenpulse_gpu_utilization_ratio{gpu="0",uuid="a"} 0.5
tokenpulse_gpu_utilization_ratio{gpu="1",uuid="b"} 0.7
"""


def test_figures_are_counter_deltas_over_the_window() -> None:
    got = figures(parse_metrics(BEFORE), parse_metrics(AFTER), seconds=10)
    assert got["batch_size_mean"] == pytest.approx(4.0)  # 40 rows in 10 batches
    assert got["batch_queue_mean_s"] == pytest.approx(0.002)  # 20000 us / 10, in seconds
    assert got["batch_queue_p99_s"] == pytest.approx(0.00099)  # 10 new, all in (0, 1000] us
    assert got["gateway_latency_mean_s"] == pytest.approx(0.1)  # 2xx only
    assert got["gpu_utilization"] == pytest.approx(0.6)
    assert got["model_time_mean_s"] is None  # not exposed: no figure, not zero


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.1, 50.0), (0.2, 100.0), (float("inf"), 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.75, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.99, []) is None


def test_the_promql_uses_the_mixins_jobs_and_series() -> None:
    exprs = prometheus_exprs("30s")
    assert 'job="tfserving"' in exprs["batch_size_mean"]
    assert "tokenpulse_gateway_request_duration_seconds_bucket" in exprs["gateway_latency_p99_s"]
    assert 'code=~"2.."' in exprs["gateway_latency_p99_s"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")
def test_every_expression_parses_in_prometheus(tmp_path: Path) -> None:
    # a real PromQL parser: a job regex once carried "\\-", which Prometheus rejects with a 400
    rules = [
        {"record": f"loadtest:{name}", "expr": expr}
        for name, expr in prometheus_exprs("30s").items()
    ]
    path = tmp_path / "loadtest.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "loadtest", "rules": rules}]}))
    done = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _client(mean: float) -> dict[str, object]:
    return {"latency_s": {"mean": mean}, "server_latency_s": {"mean": None}}


def test_client_and_server_latency_disagreement_is_flagged() -> None:
    server = ServerView("scrape", summary={"gateway_latency_mean_s": 0.05})
    assert disagreement(_client(0.055), server, "native") is None
    line = disagreement(_client(0.5), server, "native")
    assert line is not None and "outside the server" in line
    assert disagreement(_client(0.01), server, "native") is not None  # server slower: odd too
    assert disagreement(_client(0.5), ServerView("none"), "native") is None


DELAY = """
tokenpulse_shipper_delivery_delay_seconds_bucket{output="sqlite",le="0.1"} 0
tokenpulse_shipper_delivery_delay_seconds_bucket{output="sqlite",le="0.5"} 50
tokenpulse_shipper_delivery_delay_seconds_bucket{output="sqlite",le="1.0"} 100
tokenpulse_shipper_delivery_delay_seconds_bucket{output="sqlite",le="+Inf"} 100
tokenpulse_shipper_delivery_delay_seconds_bucket{output="elasticsearch",le="1.0"} 1
tokenpulse_shipper_delivery_delay_seconds_bucket{output="elasticsearch",le="+Inf"} 10
"""


def test_a_histograms_quantile_over_all_it_saw_and_per_label() -> None:
    snap, name = parse_metrics(DELAY), "tokenpulse_shipper_delivery_delay_seconds"
    sqlite, es = {"output": "sqlite"}, {"output": "elasticsearch"}
    assert quantile_delta({}, snap, name, 0.5, sqlite) == pytest.approx(0.5)
    assert quantile_delta({}, snap, name, 0.75, sqlite) == pytest.approx(0.75)
    assert quantile_delta({}, snap, name, 0.25, sqlite) == pytest.approx(0.3)
    assert quantile_delta({}, snap, name, 0.95, es) == 1.0  # past the last bound: the bound
    assert quantile_delta(snap, snap, name, 0.5, sqlite) is None  # nothing observed between


def test_totals_match_labels_and_a_page_is_read_over_http() -> None:
    from aiohttp import web

    snap = parse_metrics(BEFORE)
    duration = "tokenpulse_gateway_request_duration_seconds_count"
    assert total(snap, duration) == 11 and total(snap, duration, {"code": "2.."}) == 10
    assert total(snap, "no_such_series") is None

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=AFTER)

    def app() -> web.Application:
        a = web.Application()
        a.router.add_get("/metrics", page)
        return a

    with BackgroundServer(app, name="metrics-page") as server:
        assert scrape(f"{server.url}/metrics") == parse_metrics(AFTER)
        assert batch_totals(f"{server.url}/metrics") == (50.0, 20.0)
        assert batch_totals(f"{server.url}/nothing-here") == (0.0, 0.0)  # a 404 counts nothing
