"""An exemplar scraped by the real Prometheus resolves to a stored sample: the gateway's /metrics
speaks OpenMetrics to Prometheus (exemplar storage on), the exemplar's request_id is the id
`tokenpulse samples show` looks up in the store the shipper fills."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from stack.cli import main
from stack.components import binary
from stack.launch import http_ok, running_process
from tests.log_pipeline.support import shipped, shipper_settings, shipping, wait_until
from tests.serving.gateway.fake_continue import FakeContinue
from tests.serving.gateway.helpers import auth
from tests.support.binaries import needs_prometheus
from tests.support.gateway import free_port, make_keys_file, running_gateway

pytestmark = [pytest.mark.slow, needs_prometheus]
HISTOGRAMS = (
    "tokenpulse_gateway_request_duration_seconds_bucket",
    "tokenpulse_gateway_time_to_first_token_seconds_bucket",
    "tokenpulse_gateway_mean_nll_nats_bucket",
)


def _exemplar_ids(prom: str, metric: str) -> set[str]:
    now = time.time()
    doc = httpx.get(
        f"{prom}/api/v1/query_exemplars",
        params={"query": metric, "start": now - 600, "end": now + 60},
    ).json()
    return {e["labels"]["request_id"] for s in doc["data"] for e in s["exemplars"]}


def test_an_exemplar_scraped_by_prometheus_resolves_to_its_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool, rules = tmp_path / "spool", tmp_path / "rules.toml"
    rules.write_text("head_rate = 1.0\n")  # keep every sample
    keys = make_keys_file(tmp_path / "keys.json", demo={})
    env = {"TOKENPULSE_SINK_SPOOL_DIR": str(spool), "TOKENPULSE_SINK_RULES_FILE": str(rules)}
    settings = shipper_settings(spool, outputs=["sqlite"])
    gw_port, prom_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: gateway\n    static_configs: [{{targets: ['127.0.0.1:{gw_port}']}}]\n"
    )
    prom = f"http://127.0.0.1:{prom_port}"
    argv = [
        binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{prom_port}", "--enable-feature=exemplar-storage",
        "--log.level=warn",
    ]  # fmt: skip
    with (
        FakeContinue() as upstream,
        running_gateway(upstream.url, tmp_path / "keys.json", port=gw_port, env=env,
                        sample_sink="log_pipeline.sink:make_sink", stream_chunk_tokens=4,
                        stream_first_chunk_tokens=4) as gw,
        shipping(settings) as sh,
        running_process(argv, lambda: http_ok(f"{prom}/-/ready"), what="prometheus"),
    ):  # fmt: skip
        rid = "exemplar-0001"
        headers = {**auth(keys["demo"]), "X-Request-ID": rid}
        body = {"prompt": "hi", "stream": True, "max_new_tokens": 8}
        resp = httpx.post(f"{gw.url}/v1/generate", headers=headers, json=body)
        assert resp.status_code == 200 and resp.text.endswith("data: [DONE]\n\n")
        page = httpx.get(f"{gw.url}/metrics", headers={"Accept": "application/openmetrics-text"})
        assert page.headers["content-type"].startswith("application/openmetrics-text")
        wait_until(lambda: shipped(sh, "sqlite") == 1, "the sample in the embedded store")
        for metric in HISTOGRAMS:
            wait_until(lambda m=metric: rid in _exemplar_ids(prom, m), f"an exemplar of {metric}")
    assert main(["samples", "show", rid, "--sqlite-path", str(settings.sqlite_path)]) == 0
    record = json.loads(capsys.readouterr().out)  # one record: shown whole
    assert record["genai_sample"]["request_id"] == rid
    assert record["gen_ai"]["server"]["time_to_first_token"] > 0
    assert record["genai_sample"]["timings"]["chunks"] == 2  # 8 tokens in chunks of 4
