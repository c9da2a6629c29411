"""The exporter process in-process: HTTP routes, every collector on, promtool-clean exposition."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from devtools.standins.tfserving import TfServingStandin
from exporter.server import Exporter
from exporter.settings import ExporterSettings
from tests.support.exporter import promtool_check, scrape, scrape_until, write_golden


@pytest.fixture
def running(tmp_path):
    base = tmp_path / "gen"
    write_golden(base, 1, [("Hi", " there", 0.7)])
    config = tmp_path / "models.config"
    config.write_text(
        f"model_config_list {{ config {{ name: 'gen' base_path: '{base}' "
        "version_labels { key: 'stable' value: 1 } } }"
    )
    with TfServingStandin() as tfs:
        tfs.state.versions["gen"] = {1: "AVAILABLE"}
        tfs.state.answers[("gen", 1)] = {"Hi": (" there", 0.7)}
        settings = ExporterSettings(
            listen_address="127.0.0.1:0",
            tfserving_url=tfs.url,
            model_config_file=config,
            status_poll_interval_seconds=0.2,
            canary_interval_seconds=0.5,
            nvml_backend="fake",
            nvml_fake_gpus=2,
        )
        exporter = Exporter(settings)
        exporter.start()
        try:
            yield exporter, tfs
        finally:
            exporter.stop()


def test_metrics_with_every_collector(running):
    exporter, _ = running
    url = f"http://127.0.0.1:{exporter.port}/metrics"
    text = scrape_until(url, 'tokenpulse_canary_match{model="gen",version="1"} 1.0')
    for name in ("nvml", "tfserving", "canary"):
        assert f'tokenpulse_exporter_collector_success{{collector="{name}"}} 1.0' in text
    assert 'tokenpulse_tfserving_model_label_version{label="stable",model="gen"} 1.0' in text
    assert "tokenpulse_gpu_utilization_ratio{" in text
    assert "process_resident_memory_bytes" in text
    lint = promtool_check(text)
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), (
        lint.stdout + lint.stderr
    )


def test_text_format_even_when_openmetrics_is_preferred(running):
    exporter, _ = running
    accept = (  # what Prometheus 2.42 sends
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
        "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    req = urllib.request.Request(
        f"http://127.0.0.1:{exporter.port}/metrics", headers={"Accept": accept}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read().decode()
        assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE tokenpulse_exporter_collector_success gauge" in body
    assert "# EOF" not in body


def test_model_server_going_down_keeps_the_scrape_alive(running):
    exporter, tfs = running
    url = f"http://127.0.0.1:{exporter.port}/metrics"
    tfs.stop()
    text = scrape_until(url, 'tokenpulse_tfserving_up{model="gen"} 0.0')
    assert 'tokenpulse_exporter_collector_success{collector="tfserving"} 0.0' in text
    assert 'tokenpulse_exporter_collector_success{collector="nvml"} 1.0' in text


def test_health_landing_and_unknown_paths(running):
    exporter, _ = running
    base = f"http://127.0.0.1:{exporter.port}"
    assert scrape(f"{base}/healthz") == "ok\n"
    assert "/metrics" in scrape(f"{base}/")
    with pytest.raises(urllib.error.HTTPError) as info:
        scrape(f"{base}/nope")
    assert info.value.code == 404
