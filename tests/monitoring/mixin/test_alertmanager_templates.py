"""The deployment's Slack and PagerDuty notifications, rendered and sent by the real Alertmanager.

The generated alertmanager.yml runs as shipped, except that its secret files hold a local capture
server's URL (Slack's webhook) and a key, PagerDuty's events URL points there, and groups wait 1 s.
Each notification must carry the title with summary, model, version and severity, the runbook,
the dashboard panel and the sample search around the alert's start.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from monitoring.mixin import alertmanager
from monitoring.mixin.config import DEFAULT as c
from tokenpulse.procs import free_port

AM = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = pytest.mark.skipif(AM is None, reason="Alertmanager not installed")

START = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
LABELS = {"severity": "critical", "model": "gen", "version": "1"}
NOTES = {
    "summary": "The model server cannot be scraped.",
    "description": "tfs:8501 has been down for 1m.",
    "runbook_url": "http://127.0.0.1:9095/runbooks/TokenPulseTfServingDown",
    "dashboard_url": "http://127.0.0.1:3000/d/tokenpulse-serving/?viewPanel=15",
}


class _Capture(BaseHTTPRequestHandler):
    got: list[tuple[str, Any]]

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).got.append((self.path, json.loads(body)))
        self.send_response(202 if self.path == "/pd" else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def capture() -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    handler = type("Capture", (_Capture,), {"got": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.got
    finally:
        server.shutdown()
        server.server_close()


def _config(tmp_path: Path, capture_url: str) -> Path:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "slack-webhook-url").write_text(f"{capture_url}/slack\n")
    (secrets / "pagerduty-routing-key").write_text("routing-key\n")
    doc = yaml.safe_load(alertmanager.render(c).replace(alertmanager.SECRETS, str(secrets)))
    doc["route"]["group_wait"] = "1s"
    for receiver in doc["receivers"]:
        for pd in receiver.get("pagerduty_configs", []):
            pd["url"] = f"{capture_url}/pd"
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _post_alerts(am_url: str, alerts: list[dict[str, Any]]) -> None:
    body = json.dumps(alerts).encode()
    req = urllib.request.Request(
        f"{am_url}/api/v2/alerts", data=body, headers={"Content-Type": "application/json"}
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.status == 200
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _alert(name: str, **labels: str) -> dict[str, Any]:
    return {
        "labels": {"alertname": name, **LABELS, **labels},
        "annotations": NOTES,
        "startsAt": START.isoformat().replace("+00:00", "Z"),
        "generatorURL": "http://127.0.0.1:9090/graph?g0.expr=up",
    }


def _expected_links() -> tuple[str, str]:
    ms, window = int(START.timestamp() * 1000), 3_600_000
    dashboard = f"{NOTES['dashboard_url']}&from={ms - window}&to={ms + window}"
    iso = "%Y-%m-%dT%H:%M:%SZ"
    since, until = (
        (START - timedelta(hours=1)).strftime(iso),
        (START + timedelta(hours=1)).strftime(iso),
    )
    samples = (
        f"{c.links.kibana_url}/app/discover#/?_g=(time:(from:'{since}',to:'{until}'))"
        "&_a=(index:'genai-samples',query:(language:lucene,"
        f"query:'genai_sample.model:gen%20AND%20genai_sample.version:{quote('1')}'))"
    )
    return dashboard, samples


def test_slack_and_pagerduty_carry_title_runbook_dashboard_and_samples(
    tmp_path: Path, capture: tuple[str, list[tuple[str, Any]]]
) -> None:
    capture_url, got = capture
    port = free_port()
    am_url = f"http://127.0.0.1:{port}"
    argv = [
        str(AM), f"--config.file={_config(tmp_path, capture_url)}",
        f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
        f"--web.external-url={am_url}/", "--cluster.listen-address=", "--log.level=warn",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _post_alerts(
            am_url,
            [
                _alert("TokenPulseTfServingDown"),
                _alert("TokenPulseGpuThrottled", severity="warning"),
            ],
        )
        deadline = time.monotonic() + 30
        while {p for p, _ in got} != {"/pd", "/slack"} and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    sent = dict(got)
    assert set(sent) == {"/pd", "/slack"}, got
    dashboard, samples = _expected_links()

    pd = sent["/pd"]
    assert pd["routing_key"] == "routing-key"
    assert pd["payload"]["summary"] == (
        "[FIRING] critical TokenPulseTfServingDown: The model server cannot be scraped. "
        "(model gen, version 1, severity critical)"
    )
    assert pd["links"] == [
        {"href": NOTES["runbook_url"], "text": "Runbook"},
        {"href": dashboard, "text": "Dashboard panel"},
        {"href": samples, "text": "Sample search"},
    ]
    details = pd["payload"]["custom_details"]["alerts"]
    assert f"runbook: {NOTES['runbook_url']}" in details and f"dashboard: {dashboard}" in details

    (attachment,) = sent["/slack"]["attachments"]
    assert attachment["title"] == (
        "[FIRING] warning TokenPulseGpuThrottled: The model server cannot be scraped. "
        "(model gen, version 1, severity warning)"
    )
    text = attachment["text"]
    for line in (
        f"runbook: {NOTES['runbook_url']}",
        f"dashboard: {dashboard}",
        f"samples: {samples}",
        "source: http://127.0.0.1:9090/graph?g0.expr=up",
    ):
        assert line in text.splitlines(), text
