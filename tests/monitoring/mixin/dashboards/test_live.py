"""Proof: every dashboard query returns real data from the real components, and the previews too.

A real Prometheus scrapes the real model server, gateway (with the log pipeline's sampler and
spool), shipper and exporter (fake NVML backend) of the shared test stack (tests/conftest.py;
after the alert e2e when both run) while traffic, some errors included, goes through the
gateway, unary and streamed (some clients leaving mid-stream). Then every panel query, with
Grafana's variables substituted, must parse and return at least one series; every variable query
must find its label; every annotation query must parse. Each dashboard is also rendered to a PNG
from query_range results, and no panel may come out empty.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import time
from collections.abc import Callable

import httpx
import pytest

from devtools.stack import wait_until
from devtools.traffic import scored_responses, steady_traffic
from monitoring.mixin.dashboards.queries import (
    annotation_exprs,
    metric_names,
    panel_queries,
    substitute,
)
from monitoring.preview.prom import PromClient
from monitoring.preview.render import render_dashboard
from stack.catalogue import PROMETHEUS_SERIES
from tokenpulse.paths import DASHBOARDS

RATE_INTERVAL = "15s"  # Grafana's $__rate_interval for a 1 s scrape, rounded up for steadiness
TRAFFIC_S = 60.0  # a minute of traffic, as the overview preview in reports shows
RECENT_S = 20.0  # our own traffic right before the previews
# set to a folder to keep the PNGs (e.g. for a report); by default they stay in tmp_path
KEEP_PREVIEWS = os.environ.get("TOKENPULSE_KEEP_PREVIEWS")

pytestmark = pytest.mark.slow


# The training dashboard's series come from a training run's workers, and the shared stack runs
# none: its queries are parsed by the live Prometheus below; the drill stack fills it
# (tests/stack/test_drill.py, after training-worker-killed).
NO_RUN_HERE = "tokenpulse-training.json"


def _models():
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))
            if p.name != NO_RUN_HERE}  # fmt: skip


def _errors_through_the_gateway(stack):
    url = f"{stack.gateway.url}/v1/generate"
    bad_key = httpx.post(url, json={"prompt": "x"}, headers={"Authorization": "Bearer nope"})
    auth = {"Authorization": f"Bearer {stack.key}"}
    bad_body = httpx.post(url, json={"prompt": 3}, headers=auth)
    assert bad_key.status_code == 401 and bad_body.status_code in (400, 422)


def _streams(stack, client: httpx.Client) -> Callable[[], httpx.Response]:
    """A streamed request per call; every fourth client leaves after the first chunk."""
    body = {"prompt": "streamed traffic", "max_new_tokens": 24, "stream": True}
    auth = {"Authorization": f"Bearer {stack.key}"}
    calls = itertools.count()

    def send() -> httpx.Response:
        leave = next(calls) % 4 == 3
        with client.stream("POST", f"{stack.gateway.url}/v1/generate", json=body,
                           headers=auth) as resp:  # fmt: skip
            for line in resp.iter_lines():
                if leave and line.startswith("data:"):
                    break  # closing the response disconnects mid-stream
        return resp

    return send


def _served(prom: PromClient) -> float:
    result = prom.query("sum(tokenpulse_gateway_requests_total)")
    return result[0].points[-1][1] if result else 0.0


@pytest.fixture(scope="module")
def live(shared_stack, tmp_path_factory):
    stack = shared_stack
    workdir = tmp_path_factory.mktemp("dash-previews")
    _errors_through_the_gateway(stack)
    with (
        stack.traffic(rps=2.0) as codes,
        httpx.Client(timeout=60) as client,
        steady_traffic(_streams(stack, client), 1.0, "streams") as streamed,
    ):
        prom = PromClient(stack.prometheus_url)
        wait_until(lambda: prom.query("tokenpulse_canary_match_ratio"), 60, "canary results")
        _errors_through_the_gateway(stack)  # errors inside the previewed window too
        # the gateway starts a version's feedback counters at 0 with its first output, so that
        # rate() sees the first feedback; on a young stack that 0 must be scraped before it
        wait_until(lambda: prom.query("tokenpulse_gateway_feedback_total"), 60, "feedback at 0")
        scored_responses(stack.gateway.url, stack.key)
        # at least a minute of traffic in the stack's life (the alert e2e, when it ran first,
        # sent most of it), and a fresh stretch of our own inside the previewed window
        wait_until(
            lambda: len(codes) >= RECENT_S * 2 and _served(prom) >= TRAFFIC_S * 1.5,
            TRAFFIC_S * 3, "a minute of traffic",
        )  # fmt: skip
        assert set(streamed) <= {200}, streamed
        # the SLO stats average the recorded SLIs at every evaluation-interval step: a young
        # stack has none until it has recorded across one step boundary
        period = [q for m in _models().values() for q in panel_queries(m) if q.instant]
        assert period
        wait_until(
            lambda: all(prom.query(substitute(q.expr, RATE_INTERVAL)) for q in period),
            TRAFFIC_S, "the SLO period's recorded SLIs",
        )  # fmt: skip
        yield stack, prom, workdir
    prom.close()


def test_every_panel_query_returns_series(live):
    _, prom, _ = live
    queries = [q for model in _models().values() for q in panel_queries(model)]
    assert len(queries) >= 60

    def empty(among):  # PromError (the test fails) if a query does not parse
        return [q for q in among if not prom.query(substitute(q.expr, RATE_INTERVAL))]

    # an instant query sees a series only while its last scrape is fresh: one scrape missed on a
    # loaded box (the exporter's NVML deadline, say) marks it stale until the next one, 1 s later.
    # Grafana draws the range, so a query empty now but answering within a few scrapes is drawn.
    missing = empty(queries)
    deadline = time.monotonic() + 10
    while missing and time.monotonic() < deadline:
        time.sleep(1)
        missing = empty(missing)
    assert missing == [], "\n".join(f"{q.dashboard} / {q.panel} / {q.legend}" for q in missing)


def _declared(stack):
    """Families the components' pages declare (# TYPE), with samples or not yet."""
    urls = (stack.modelserver.metrics_url, f"{stack.gateway.url}/metrics",
            stack.exporter.metrics_url, stack.shipper_url)  # fmt: skip
    pages = "\n".join(httpx.get(url, timeout=10).text for url in urls)
    return set(re.findall(r"^# TYPE (\S+) ", pages, re.M))


def test_every_metric_the_dashboards_use_was_scraped(live):
    stack, _, _ = live
    used = set().union(
        *(metric_names(q.expr) for m in _models().values() for q in panel_queries(m))
    )
    # ALERTS: Prometheus' own, present while an alert fires (the panel falls back to "none")
    unscraped = used - stack.metric_names() - PROMETHEUS_SERIES
    # counters of rare events get their first series with their first event (their panels fall
    # back to 0 until then); the components must still declare them
    assert unscraped <= _declared(stack)
    assert {n.removeprefix("tokenpulse_gateway_") for n in unscraped} <= {
        "shed_total", "rate_limited_total", "circuit_breaker_rejected_total",
        "empty_outputs_total", "client_disconnects_total",
    }  # fmt: skip


def test_every_variable_finds_its_label_and_annotations_parse(live):
    _, prom, _ = live
    for model in _models().values():
        for var in model["templating"]["list"]:
            if var["type"] != "query":
                continue
            m = re.fullmatch(r"label_values\((.*), (\w+)\)", var["query"])
            assert m, var["query"]
            selector = substitute(m.group(1), RATE_INTERVAL)
            # as Grafana resolves it: the label's values on the matching series over the range
            # shown (the last 5 minutes here), not at one instant
            end = time.time()
            assert prom.label_values(m.group(2), selector, end - 300, end), var["name"]
        for expr in annotation_exprs(model):
            prom.query(substitute(expr, RATE_INTERVAL))


def test_every_dashboard_previews_with_no_empty_panel(live):
    _, prom, workdir = live
    out = workdir / "previews"
    for model in _models().values():
        preview = render_dashboard(model, prom, out, TRAFFIC_S * 2, RATE_INTERVAL)
        assert preview.path.stat().st_size > 50_000
        assert len(preview.panels) == sum(1 for p in model["panels"] if p["type"] != "row")
        assert preview.empty() == [], model["uid"]
    if KEEP_PREVIEWS:
        shutil.copytree(out, KEEP_PREVIEWS, dirs_exist_ok=True)


def test_the_training_dashboards_queries_parse_on_the_live_prometheus(live):
    _, prom, _ = live
    model = json.loads((DASHBOARDS / NO_RUN_HERE).read_text())
    queries = list(panel_queries(model))
    assert len(queries) >= 8
    for q in queries:  # PromError (the test fails) when one does not parse
        prom.query(substitute(q.expr.replace("$run", ".*"), RATE_INTERVAL))
