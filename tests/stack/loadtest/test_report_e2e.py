"""The report builds from a short real run: a gateway in front of the TF Serving stand-in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devtools.standins.tfserving import StandinState, TfServingStandin
from stack import cli
from stack.launch import running_gateway
from tests.support.gateway import make_keys_file

pytestmark = pytest.mark.slow


def test_a_short_run_through_a_real_gateway_builds_the_whole_report(tmp_path: Path) -> None:
    keys = make_keys_file(tmp_path / "keys.json", a={}, b={"requests_per_minute": 6})
    key_file = tmp_path / "keys.txt"
    key_file.write_text("\n".join(keys.values()) + "\n")
    out = tmp_path / "report"
    with (
        TfServingStandin(StandinState(service_time_s=0.02, max_concurrency=4)) as tfs,
        running_gateway(tfs.url, tmp_path / "keys.json") as gw,
    ):
        rc = cli.main([
            "loadtest", "--url", gw.url, "--route", "openai", "--key-file", str(key_file),
            "--rate", "8", "--arrival", "constant", "--duration-s", "3", "--no-progress",
            "--report-dir", str(out),
            "--metrics-url", f"{gw.url}/metrics", "--server-pid", str(gw.pid),
            "--prompts-file", "stack/loadtest/workloads/customer_service_zh.jsonl",
        ])  # fmt: skip
    assert rc == 0
    doc = json.loads((out / "summary.json").read_text())
    (run,) = doc["runs"]
    client = run["client"]
    assert client["requests"] == 24 and client["ok"] >= 12
    # key b is limited to 6/min: its surplus requests are sheds (429), not errors
    assert client["sheds"] > 0 and client["errors"] == 0
    assert any(label.startswith("429") for label in client["by_status"])
    server = run["server"]
    assert server["source"] == "scrape"
    assert server["summary"]["gateway_latency_mean_s"] > 0
    assert server["summary"]["process_cpu_cores"] is not None
    assert client["server_latency_s"]["mean"] > 0  # the responses' own timings
    assert client["ttft_s"].startswith("n/a") and client["itl_s"].startswith("n/a")
    for name in ("latency", "throughput", "errors", "server_latency", "utilisation"):
        assert (out / f"{name}.png").stat().st_size > 0, name
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 5
    assert not re.search(r"(src|href)=['\"]https?://", page)  # nothing fetched: opens offline
    command = (out / "command.txt").read_text()
    assert "--key-file" in command and all(k not in command for k in keys.values())
    assert all(k not in (out / "summary.json").read_text() for k in keys.values())
    versions = json.loads((out / "versions.json").read_text())
    assert versions["python"] and "aiohttp" in versions
