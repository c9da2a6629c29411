"""Against the real local model server: version states follow a hot swap; the canary catches a
degraded version.

The drill for the canary: version 2 ships noised weights (`tiny_degraded_export`) with the golden
expectations of the good model, as when a bad artifact is deployed under an unchanged release.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exporter.server import Exporter
from exporter.settings import ExporterSettings
from tests.support.exporter import promtool_check, scrape, wait_for
from tests.support.models import install_version
from tests.support.modelserver import running_modelserver
from tokenpulse.tfserving.signature import GOLDEN_FILE

pytestmark = pytest.mark.slow
TIMEOUT_S = 120.0


def _state(exporter: Exporter, version: int, state: str) -> float | None:
    labels = {"model": "gen", "version": str(version), "state": state}
    return exporter.registry.get_sample_value("tokenpulse_tfserving_model_version_state", labels)


def _canary(exporter: Exporter, name: str, version: int) -> float | None:
    labels = {"model": "gen", "version": str(version)}
    return exporter.registry.get_sample_value(f"tokenpulse_canary_{name}", labels)


@pytest.fixture
def deployed(tmp_path: Path, tiny_export: Path):
    """Model server with policy `all` on a base path holding version 1, and the exporter."""
    base = tmp_path / "models" / "gen"
    install_version(tiny_export, base, 1)
    config = tmp_path / "models.config"
    config.write_text(
        f"model_config_list {{ config {{ name: 'gen' base_path: '{base}' model_platform: "
        "'tensorflow' model_version_policy { all {} } "
        "version_labels { key: 'stable' value: 1 } } }\n"
    )
    with running_modelserver(config_file=config, file_system_poll_wait_seconds=0.5) as server:
        settings = ExporterSettings(
            listen_address="127.0.0.1:0",
            tfserving_url=server.rest_url,
            model_config_file=config,
            status_poll_interval_seconds=0.25,
            canary_interval_seconds=3600,  # only state changes trigger canary runs here
            canary_timeout_seconds=60,
            collectors={"nvml": False},
        )
        exporter = Exporter(settings)
        exporter.start()
        try:
            yield exporter, base
        finally:
            exporter.stop()


def test_hot_swap_and_degraded_canary(deployed, tiny_export, tiny_degraded_export, tmp_path):
    exporter, base = deployed
    wait_for(lambda: _state(exporter, 1, "AVAILABLE") == 1, TIMEOUT_S, "version 1 AVAILABLE")
    wait_for(lambda: _canary(exporter, "match", 1) == 1, TIMEOUT_S, "version 1 matches its golden")
    label = {"model": "gen", "label": "stable"}
    assert (
        exporter.registry.get_sample_value("tokenpulse_tfserving_model_label_version", label) == 1
    )
    change = "tokenpulse_tfserving_model_version_state_change_timestamp_seconds"
    v1_available_at = exporter.registry.get_sample_value(change, {"model": "gen", "version": "1"})

    # Deploy version 2: the degraded weights, carrying the good model's golden expectations.
    staged = tmp_path / "staged"
    shutil.copytree(tiny_degraded_export, staged)
    shutil.copyfile(tiny_export / GOLDEN_FILE, staged / GOLDEN_FILE)
    install_version(staged, base, 2)
    wait_for(lambda: _state(exporter, 2, "AVAILABLE") == 1, TIMEOUT_S, "version 2 AVAILABLE")
    wait_for(lambda: _canary(exporter, "match", 2) is not None, TIMEOUT_S, "canary on version 2")
    assert _canary(exporter, "success", 2) == 1  # it answered...
    assert _canary(exporter, "match", 2) == 0  # ...but not what the release was validated with
    assert _canary(exporter, "match_ratio", 2) < 1
    # The degraded version is less sure of its answers than the release was of the golden ones,
    # overall and, more sharply, where its answers diverge.
    assert _canary(exporter, "mean_nll_nats", 2) > _canary(exporter, "golden_mean_nll_nats", 2)
    assert _canary(exporter, "mean_nll_nats", 2) > _canary(exporter, "mean_nll_nats", 1)
    assert _canary(exporter, "mismatch_nll_delta_nats", 2) > 0
    assert _canary(exporter, "mismatch_nll_delta_nats", 1) == 0
    assert _canary(exporter, "match", 1) == 1  # the good version still matches

    # Swap out version 1: it leaves AVAILABLE and its change time moves on.
    shutil.rmtree(base / "1")
    wait_for(lambda: _state(exporter, 1, "AVAILABLE") != 1, TIMEOUT_S, "version 1 unloaded")
    assert _state(exporter, 2, "AVAILABLE") == 1
    v1_changed_at = exporter.registry.get_sample_value(change, {"model": "gen", "version": "1"})
    assert v1_changed_at is None or v1_changed_at > v1_available_at
    success = ("tokenpulse_exporter_collector_success", {"collector": "tfserving"})
    assert exporter.registry.get_sample_value(*success) == 1

    text = scrape(f"http://127.0.0.1:{exporter.port}/metrics")
    lint = promtool_check(text)
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout


def test_latest_policy_hot_swap_without_a_config_file(tmp_path, tiny_export):
    """TF Serving's default policy (latest 1): deploying version 2 unloads version 1."""
    base = tmp_path / "gen"
    install_version(tiny_export, base, 1)
    with running_modelserver(base, file_system_poll_wait_seconds=0.5) as server:
        settings = ExporterSettings(
            listen_address="127.0.0.1:0",
            tfserving_url=server.rest_url,
            model_name="gen",
            model_base_path=base,
            status_poll_interval_seconds=0.25,
            canary_interval_seconds=3600,
            collectors={"nvml": False},
        )
        exporter = Exporter(settings)
        exporter.start()
        try:
            wait_for(lambda: _canary(exporter, "match", 1) == 1, TIMEOUT_S, "canary on version 1")
            install_version(tiny_export, base, 2)
            wait_for(lambda: _state(exporter, 2, "AVAILABLE") == 1, TIMEOUT_S, "version 2 up")
            wait_for(lambda: _state(exporter, 1, "AVAILABLE") != 1, TIMEOUT_S, "version 1 down")
            wait_for(lambda: _canary(exporter, "match", 2) == 1, TIMEOUT_S, "canary on version 2")
            # Only AVAILABLE versions are probed; the answering server unloaded version 1, so
            # its series go (a rolled-back mismatch must not hold its alert), version 2's stay
            runs = "tokenpulse_canary_runs_total"
            exporter.sources.canary_runner().run_once()
            assert _canary(exporter, "match", 1) is None
            v1_ok = {"model": "gen", "version": "1", "result": "ok"}
            assert exporter.registry.get_sample_value(runs, v1_ok) is None
            v2_ok = {"model": "gen", "version": "2", "result": "ok"}
            assert exporter.registry.get_sample_value(runs, v2_ok) >= 1
            available = exporter.registry.get_sample_value(
                "tokenpulse_tfserving_model_versions_available", {"model": "gen"}
            )
            assert available == 1
        finally:
            exporter.stop()
