"""prometheus.yml rendering: valid for promtool, one job per component named after the config."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from monitoring.mixin import prometheus
from monitoring.mixin.config import DEFAULT as config
from tokenpulse.paths import ROOT


def test_local_targets_render_one_job_per_component(tmp_path: Path) -> None:
    targets = prometheus.Targets(
        modelserver=["127.0.0.1:8501"], gateway=["127.0.0.1:8080"], exporter=["127.0.0.1:9410"]
    )
    doc = yaml.safe_load(
        prometheus.render(config, targets, ["/rules/*.yml"], alertmanagers=["127.0.0.1:9093"],
                          scrape_interval="2s", evaluation_interval="1s")
    )  # fmt: skip
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert list(jobs) == [config.jobs.modelserver, config.jobs.gateway, config.jobs.exporter]
    assert jobs[config.jobs.modelserver]["metrics_path"] == "/monitoring/prometheus/metrics"
    assert "metrics_path" not in jobs[config.jobs.gateway]
    assert doc["global"] == {"scrape_interval": "2s", "evaluation_interval": "1s",
                             "scrape_timeout": "2s"}  # fmt: skip
    assert doc["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9093"]


def test_no_alertmanager_means_no_alerting_section() -> None:
    doc = yaml.safe_load(prometheus.render(config, prometheus.Targets(gateway=["a:1"]), []))
    assert "alerting" not in doc and doc["rule_files"] == []


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_compose_file_passes_promtool_check_config(tmp_path: Path) -> None:
    path = ROOT / "monitoring/prometheus/prometheus.yml"
    assert path.read_text() == prometheus.render_compose(config)
    out = subprocess.run(
        ["promtool", "check", "config", "--syntax-only", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = [j["job_name"] for j in yaml.safe_load(path.read_text())["scrape_configs"]]
    # and the training runs' file_sd job last
    assert jobs == [getattr(config.jobs, c) for c in (*prometheus.SCRAPED, "training")]


def test_training_workers_come_from_file_sd_under_the_configured_job() -> None:
    files = ["/runs/*/prometheus-targets.json"]
    jobs = prometheus.scrape_configs(config, prometheus.Targets(training_files=files))
    assert jobs == [
        {
            "job_name": "tokenpulse-training",
            "file_sd_configs": [{"files": files, "refresh_interval": "30s"}],
        }
    ]
    assert prometheus.scrape_configs(config, prometheus.Targets()) == []
