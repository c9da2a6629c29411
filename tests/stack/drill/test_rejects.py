"""version-rejects-all without a stack: its fault through the real fault proxy in front of a TF
Serving stand-in, with a real gateway behind it, and its judgement of what Prometheus counted.
The drill itself runs in tests/stack/test_drill.py."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.standins.tfserving import TfServingStandin
from stack import drill
from stack.config import Ports, StackConfig
from stack.drill import proxy as fault_proxy
from stack.drill.rejects import REFUSAL, VersionRejectsAll, grown
from stack.drill.scenario import Log
from stack.drill.target import Target
from stack.up.state import StackState, write_state
from tests.support.binaries import needs_prometheus
from tests.support.gateway import make_keys_file, running_gateway
from tokenpulse.paths import ROOT
from tokenpulse.procs import free_port


def _target(run_dir: Path, key: str, ports: dict[str, int]) -> Target:
    (run_dir / "demo-key.txt").write_text(key + "\n")
    config = StackConfig(
        run_dir=run_dir, ports=Ports(gateway_port=ports["gateway_port"]), rules="compressed",
        restart_delay_s=20, fault_proxy_port=ports["fault_proxy_port"],
    )  # fmt: skip
    write_state(StackState(config, os.getpid(), {}))
    return Target(run_dir)


@pytest.fixture
def proxied_gateway(tmp_path: Path) -> Iterator[Target]:
    """stand-in <- fault proxy <- gateway, as `up --fault-proxy-port` wires them."""
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    with TfServingStandin() as standin:
        server = fault_proxy.serve(free_port(), standin.url)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        try:
            # a breaker that never opens: every request in the test reaches the proxy
            with running_gateway(
                f"http://127.0.0.1:{port}", tmp_path / "keys.json", breaker_failure_threshold=1000
            ) as gw:
                ports = {"gateway_port": gw.port, "fault_proxy_port": port}
                yield _target(tmp_path, key, ports)
        finally:
            server.shutdown()
            server.server_close()


def _generate(target: Target) -> httpx.Response:
    return httpx.post(
        target.state.url("gateway_port", "/v1/generate"),
        json={"prompt": "drill traffic", "max_new_tokens": 4},
        headers={"Authorization": f"Bearer {target.key}"},
    )


def test_the_fault_refuses_every_predict_which_the_gateway_answers_502(
    proxied_gateway: Target,
) -> None:
    target = proxied_gateway
    assert _generate(target).status_code == 200
    with VersionRejectsAll().fault(target, Log()):
        refused = [_generate(target) for _ in range(3)]
        assert {r.status_code for r in refused} == {502}
        assert {r.json()["error"]["code"] for r in refused} == {"upstream_rejected"}
        assert all(REFUSAL in r.json()["error"]["message"] for r in refused)
        # the version still looks healthy: the status poll is not refused
        ready = httpx.get(target.state.url("gateway_port", "/readyz"))
        assert ready.status_code == 200 and ready.json()["upstream_ready"] is True
    assert _generate(target).status_code == 200  # the fault is removed on leaving


def _prometheus(counted: dict[str, float], asked: list[str]) -> Any:
    def query(expr: str) -> list[dict[str, Any]]:
        asked.append(expr)
        code = next(c for c in counted if f'code="{c}"' in expr)
        return [{"metric": {}, "value": [0, str(counted[code])]}]

    return query


@pytest.mark.parametrize(
    ("counted", "problems"),
    [
        ({"502": 4.2, "503": 33.0, "422": 0.0}, []),
        ({"502": 0.0, "503": 0.0, "422": 37.0}, ["counted no 502", "answered 37 refusals 422"]),
    ],
)
def test_check_reads_the_refusals_as_the_sli_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: dict[str, float],
    problems: list[str],
) -> None:  # fmt: skip
    target = _target(tmp_path, "k", {"gateway_port": 1, "fault_proxy_port": 2})
    asked: list[str] = []
    monkeypatch.setattr(target, "query", _prometheus(counted, asked))
    log = Log()
    log.fault_removed_at = log.started + 75.4
    VersionRejectsAll().check(target, log)
    assert len(log.problems) == len(problems)
    assert all(want in got for want, got in zip(problems, log.problems, strict=True))
    assert log.remarks == [
        f"while the fault was on: about {counted['502']:.0f} answered 502 (upstream_rejected), "
        f"{counted['503']:.0f} 503 (the breaker open)"
    ]
    # over the fault's window, ending when it was removed
    assert all("[75s] @ " in expr and f"{log.fault_removed_at:.3f}" in expr for expr in asked)


@needs_prometheus
def test_growth_counts_a_series_born_in_the_window_as_prometheus_evaluates_it(
    tmp_path: Path,
) -> None:
    """The gateway's first 502 creates its series; increase() needs two samples of it, so a
    breaker that opened before the second scrape left the check counting none (CI saw that)."""
    requests = "tokenpulse_gateway_requests_total"
    case = {
        "rule_files": [],
        "evaluation_interval": "15s",
        "tests": [{
            "interval": "15s",
            "input_series": [
                # born at 90 s with 7 (the first scrape after the first 502s), then 9
                {"series": f'{requests}{{code="502",instance="a"}}', "values": "_x5 7 9 9 9"},
                # there before the window: 100 at its start, 130 at its end
                {"series": f'{requests}{{code="503",instance="a"}}',
                 "values": "100 100 100 100 100 110 130 130 130"},
            ],
            "promql_expr_test": [
                {"expr": grown(f'{requests}{{code="{code}"}}', 60, 120.0), "eval_time": "2m",
                 "exp_samples": [{"labels": "{}", "value": value}]}
                for code, value in (("502", 9), ("503", 30))
            ] + [
                # what increase() made of the same window: 7 to 9, extrapolated; the first 7 lost
                {"expr": f'sum(increase({requests}{{code="502"}}[60s] @ 120))', "eval_time": "2m",
                 "exp_samples": [{"labels": "{}", "value": 8 / 3}]},
            ],
        }],
    }  # fmt: skip
    (tmp_path / "grown.test.yml").write_text(json.dumps(case))
    done = subprocess.run(
        ["promtool", "test", "rules", "grown.test.yml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_is_registered_and_expects_a_page_the_compressed_rules_define() -> None:
    assert drill.SCENARIOS["version-rejects-all"] is VersionRejectsAll
    doc = yaml.safe_load((ROOT / "alerts/compressed/alerts.rules.yml").read_text())
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    (expected,) = VersionRejectsAll.expect
    assert expected.receiver == "pager"
    assert any(
        r["alert"] == expected.alertname and r["labels"]["severity"] == "critical" for r in alerts
    )
