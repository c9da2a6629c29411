"""End to end, on the stack `tokenpulse up` starts: what a newcomer does, and two incidents.

One `tokenpulse up` (tiny model, time-compressed rules, 2 s scrapes, fake GPUs) serves the whole
module; the tests run in file order. Version 1 is the stable export. Version 2, labelled canary,
is what `up --canary-degrade-noise` serves: the same model exported with `--degrade-noise`,
given by up the golden outputs the healthy model recorded: weights broken after their canary
expectations were written, as a bad checkpoint conversion would leave them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from devtools.stack import wait_until
from devtools.traffic import scored_responses
from monitoring.mixin.dashboards.queries import metric_names, panel_queries, substitute
from monitoring.preview.prom import PromClient
from stack.drill.canary import DEGRADE_NOISE
from tests.e2e.upstack import UpStack, alive, running_up
from tests.support.binaries import needs_prometheus
from tests.support.models import install_version
from tokenpulse.paths import DASHBOARDS, ROOT
from tokenpulse.tfserving.signature import GOLDEN_FILE

RULE_FILES = ("alerts/compressed/recording.rules.yml", "alerts/compressed/alerts.rules.yml")
RATE_INTERVAL = "15s"  # Grafana's $__rate_interval for 2 s scrapes, rounded up for steadiness
TRAFFIC_S = 45.0
PII_PROMPT = "reach me at jane.doe@example.com about order 7"
SYMPTOM_OF_DOWN = "TokenPulseGatewayAvailabilityBudgetBurn"
# counters of rare events: their first series comes with their first event (declared all along)
EVENT_ONLY = {
    "tokenpulse_gateway_shed_total", "tokenpulse_gateway_rate_limited_total",
    "tokenpulse_gateway_circuit_breaker_rejected_total", "tokenpulse_gateway_empty_outputs_total",
    "tokenpulse_gpu_xid_last_timestamp_seconds",
}  # fmt: skip

pytestmark = [pytest.mark.slow, needs_prometheus]


@pytest.fixture(scope="module")
def up(
    tiny_export: Path, tiny_degraded_export: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UpStack]:
    workdir = tmp_path_factory.mktemp("up-stack")
    base = workdir / "models" / "gen"
    install_version(tiny_export, base, 1)
    # the cached degraded build, so up does not build one; it still gives it stable's answers
    canary = install_version(tiny_degraded_export, base, 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_")}
    noise = f"--canary-degrade-noise={DEGRADE_NOISE:g}"
    with running_up(workdir, "--preset=tiny", noise, env=env) as stack:
        assert (canary / GOLDEN_FILE).read_bytes() == (tiny_export / GOLDEN_FILE).read_bytes()
        yield stack


@pytest.fixture(scope="module")
def prom(up: UpStack) -> Iterator[PromClient]:
    client = PromClient(up.url("prometheus_port"))
    yield client
    client.close()


def _errors_through_the_gateway(up: UpStack) -> None:
    assert up.generate("x", key="not-a-key").status_code == 401
    bad = httpx.post(
        f"{up.url('gateway_port')}/v1/completions", json={"prompt": 3},
        headers={"Authorization": f"Bearer {up.key}"},
    )  # fmt: skip
    assert bad.status_code in (400, 422)


@pytest.fixture(scope="module")
def traffic(up: UpStack, prom: PromClient) -> None:
    """Under a minute of traffic with some errors, streams and feedback in it, canary results
    scraped."""
    _errors_through_the_gateway(up)
    with up.traffic(rps=2.0, stream_every=2) as codes:
        wait_until(lambda: prom.query("model:canary_mean_nll_nats:canary"), 90, "canary results")
        # the TTFT SLI needs one rule evaluation whose window saw a stream: one that saw none
        # records NaN (0/0), which the SLO panels leave out, and a loaded box streams seldom
        wait_until(
            lambda: prom.query("model:gateway_slow_first_tokens:ratio_rate5m >= 0"),
            120,
            "a TTFT SLI that is a number",
        )
        _errors_through_the_gateway(up)
        scored_responses(up.url("gateway_port"), up.key)  # the feedback panel's data
        wait_until(lambda: len(codes) >= TRAFFIC_S * 1.5, TRAFFIC_S * 4, "traffic")
    assert set(codes) == {200}


def test_the_printed_curl_answers_through_the_gateway(up: UpStack) -> None:
    assert f"127.0.0.1:{up.ports['gateway_port']}" in up.snippet("curl -sS")
    done = subprocess.run(
        ["bash", "-c", up.snippet("curl -sS")], capture_output=True, text=True, timeout=60
    )
    body = json.loads(done.stdout)
    assert body["object"] == "text_completion" and body["choices"][0]["finish_reason"]
    assert body["tokenpulse"]["version_label"] in ("stable", "canary")
    assert (up.run_dir / "demo-key.txt").stat().st_mode & 0o077 == 0


def _rule_metrics() -> set[str]:
    used, recorded = set(), set()
    for path in RULE_FILES:
        for group in yaml.safe_load((ROOT / path).read_text())["groups"]:
            for rule in group["rules"]:
                used |= metric_names(rule["expr"])
                recorded |= {rule["record"]} if "record" in rule else set()
    return used - recorded


# A training run's series (its dashboard, its alerts): this stack runs no training. The rules'
# and the dashboard's names are checked against the workers' registry in tests/alerts/test_e2e.py
# and tests/monitoring/mixin/dashboards/test_live.py.
NO_RUN_HERE = ("tokenpulse-training.json", "tokenpulse_training_")


def _dashboards() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))
            if p.name != NO_RUN_HERE[0]]  # fmt: skip


def _declared(up: UpStack) -> set[str]:
    """Families declared (# TYPE) on the /metrics pages the banner lists."""
    block = up.banner.split("Metrics pages Prometheus scrapes:")[1].split("\n\n")[0]
    pages = "\n".join(httpx.get(u, timeout=10).text for u in re.findall(r"http\S+", block))
    return set(re.findall(r"^# TYPE (\S+) ", pages, re.M))


def test_prometheus_holds_every_metric_rules_and_dashboards_use(
    up: UpStack, prom: PromClient, traffic: None
) -> None:
    dashboards = {n for d in _dashboards() for q in panel_queries(d) for n in metric_names(q.expr)}
    used = {n for n in _rule_metrics() | dashboards if n.startswith(("tokenpulse_", ":"))
            and not n.startswith(NO_RUN_HERE[1])}  # fmt: skip
    assert len(used) >= 40
    held = set(
        httpx.get(f"{up.url('prometheus_port')}/api/v1/label/__name__/values").json()["data"]
    )
    missing = used - held
    assert missing <= EVENT_ONLY, sorted(missing)
    assert missing <= _declared(up)


# Panels that compare the labelled versions' live outputs: the steady traffic sends one key, and
# a key sticks to one side of the canary split, so one version here has no outputs to compare
# with. tests/monitoring/mixin/dashboards/test_live.py shows them answering on the shared stack.
NEEDS_BOTH_VERSIONS = {"Canary vs stable on live traffic"}


def test_every_dashboard_query_returns_data(prom: PromClient, traffic: None) -> None:
    queries = [q for d in _dashboards() for q in panel_queries(d)]
    assert len(queries) >= 60
    assert NEEDS_BOTH_VERSIONS <= {q.panel for q in queries}
    queries = [q for q in queries if q.panel not in NEEDS_BOTH_VERSIONS]

    def empty(among: list) -> list:
        return [q for q in among if not prom.query(substitute(q.expr, RATE_INTERVAL))]

    # a young stack's recorded SLIs appear one rule evaluation (30 s here) after the traffic
    # that makes them, later on a loaded box: Grafana draws the range, so a panel that answers
    # within a few evaluations is drawn (tests/monitoring/mixin/dashboards/test_live.py waits too)
    missing = empty(queries)
    deadline = time.monotonic() + 90
    while missing and time.monotonic() < deadline:
        time.sleep(5)
        missing = empty(missing)
    assert [f"{q.dashboard} / {q.panel} / {q.legend}" for q in missing] == []


def test_a_sample_is_searchable_and_redacted(up: UpStack) -> None:
    # a truncated output ("length") is always kept by the shipped sampling rules
    assert up.generate(PII_PROMPT, max_tokens=4).status_code == 200
    command = up.snippet(".venv/bin/tokenpulse samples search").strip()
    argv = [sys.executable, "-m", "stack.cli", *command.split()[1:], "--json"]
    argv += ["--text", "order"]

    def ours() -> list[dict]:
        # canaries and earlier traffic are sampled too, and the tiny model's text can say "order"
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        found = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        return [r for r in found if "about order 7" in json.dumps(r)]

    (record, *_) = wait_until(ours, 60, "the sample in the embedded store")
    text = json.dumps(record)
    assert "jane.doe@example.com" not in text
    assert "[REDACTED:email]" in text


def _firing(notes: list[dict], receiver: str | None = None) -> list[dict]:
    return [
        a
        for n in notes
        for a in n["alerts"]
        if a["status"] == "firing" and receiver in (None, n["receiver"])
    ]


def test_degraded_canary_alerts_for_its_version_and_stable_stays_quiet(
    up: UpStack, prom: PromClient, traffic: None
) -> None:
    wait_until(
        lambda: [a for a in _firing(up.notifications()) if a["labels"].get("version") == "2"],
        90, "the canary version's alert at the receiver",
    )  # fmt: skip
    alerts = _firing(up.notifications())
    canary = {a["labels"]["alertname"] for a in alerts if a["labels"].get("version") == "2"}
    assert "TokenPulseCanaryMismatch" in canary
    assert [a["labels"] for a in alerts if a["labels"].get("version") == "1"] == []
    # the quality dashboard shows the difference: the canary misses its golden answers and is
    # less confident on them than stable
    served = _quality_panel(prom, "Canary NLL: answers vs golden", "served")
    assert served["2"] > served["1"]
    match = _quality_panel(prom, "Canary success and match", "match")
    assert match["2"] < match["1"] == 1.0


def _quality_panel(prom: PromClient, title: str, legend: str) -> dict[str, float]:
    """Latest value per version of one query of the quality dashboard, as Grafana sends it."""
    model = json.loads((DASHBOARDS / "tokenpulse-quality.json").read_text())
    (query,) = [q for q in panel_queries(model) if q.panel == title and q.legend.startswith(legend)]
    series = prom.query(substitute(query.expr, RATE_INTERVAL))
    return {s.labels["version"]: s.points[-1][1] for s in series}


def _suppressed(up: UpStack) -> set[str]:
    doc = httpx.get(f"{up.url('alertmanager_port')}/api/v2/alerts", timeout=10).json()
    return {a["labels"]["alertname"] for a in doc if a["status"]["state"] == "suppressed"}


def _paged(up: UpStack, before: int, status: str) -> list[dict]:
    return [
        a
        for n in up.notifications()[before:]
        for a in n["alerts"]
        if n["receiver"] == "pager" and a["status"] == status
    ]


def test_model_server_outage_fails_fast_pages_and_resolves_after_restart(up: UpStack) -> None:
    before = len(up.notifications())
    with up.traffic(rps=2.0):
        time.sleep(3)
        os.kill(up.pids()["modelserver"], 15)
        wait_until(lambda: not alive([up.pids()["modelserver"]]), 30, "the model server to exit")
        refused = up.generate("is anyone there")
        # fails fast: refused at once (or by the open breaker), not after an upstream timeout
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] in ("upstream_unavailable", "circuit_open")
        (page,) = wait_until(lambda: _paged(up, before, "firing"), 120, "the page")
        assert page["labels"]["alertname"] == "TokenPulseTfServingDown"
        assert SYMPTOM_OF_DOWN in wait_until(lambda: _suppressed(up), 90, "inhibited symptoms")
        up.read_until("modelserver restarted", 300)
        wait_until(lambda: _paged(up, before, "resolved"), 120, "the resolution")
    assert [a["labels"]["alertname"] for a in _paged(up, before, "firing")] == [
        "TokenPulseTfServingDown"
    ]


def test_ctrl_c_stops_every_process_and_says_so(up: UpStack) -> None:
    pids = list(up.pids().values())
    assert len(pids) == 7 and alive(pids) == pids
    assert up.interrupt() == 0
    assert "SIGINT received: stopping the stack" in up.banner
    assert "stopped all 7 processes of the stack" in up.banner
    assert alive(pids) == []
