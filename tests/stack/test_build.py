"""`tokenpulse build [--check]`: one drift check over every generated file; the metric check."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from monitoring.mixin import rulefiles
from monitoring.mixin.dashboards import build as dashboards
from stack import build

RULES = Path("alerts/alerts.rules.yml")
SLO = Path("dashboards/tokenpulse-slo.json")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tokenpulse build")
    build.add_arguments(parser)
    return parser.parse_args(list(argv))


def _copy(root: Path) -> Path:
    """A checkout-like folder holding the generated files and the runbooks."""
    build.write(build.generated_files(), root)
    shutil.copytree(build.ROOT / "alerts" / "runbooks", root / "alerts" / "runbooks")
    return root


def _misspell(fn: Callable[[], dict[str, str]], name: str, old: str, new: str) -> Callable:
    def tampered(*args: object, **kwargs: object) -> dict[str, str]:
        out = fn(*args, **kwargs)
        assert old in out[name]
        return {**out, name: out[name].replace(old, new)}

    return tampered


def test_committed_files_match_the_generators(capsys: pytest.CaptureFixture[str]) -> None:
    assert build.main(_args("--check")) == 0, capsys.readouterr().err


def test_every_generator_is_covered() -> None:
    files = build.generated_files()
    folders = {p.parent for p in files}
    assert {
        Path("alerts"), Path("alerts/compressed"), Path("monitoring/alertmanager"),
        Path("monitoring/prometheus"), Path("dashboards"), Path("log_pipeline/assets"),
        Path("deploy/k8s/base/monitoring"), Path("deploy/k8s/prometheus-adapter"),
        Path("deploy/k8s/kube-prometheus-stack"),
        Path("deploy/k8s/components/serving-config"),
        Path("deploy/k8s/components/training-monitor"),
    } == folders  # fmt: skip
    assert Path("log_pipeline/assets/kibana.ndjson") in files


def test_check_names_stale_missing_and_stray_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(tmp_path)
    assert build.run(check=True, root=root) == 0
    (root / RULES).write_text("groups: []\n")
    (root / "log_pipeline/assets/kibana.ndjson").unlink()
    (root / "dashboards/old.json").write_text("{}\n")
    assert build.drift(build.generated_files(), root) == [
        (RULES, "stale"),
        (Path("dashboards/old.json"), "stray"),
        (Path("log_pipeline/assets/kibana.ndjson"), "missing"),
    ]
    capsys.readouterr()
    assert build.run(check=True, root=root) == 1
    err = capsys.readouterr().err
    assert f"stale: {RULES}" in err and "stray: dashboards/old.json" in err
    assert "missing: log_pipeline/assets/kibana.ndjson" in err
    assert build.run(check=False, root=root) == 0
    assert "removed dashboards/old.json" in capsys.readouterr().out
    assert build.run(check=True, root=root) == 0


def test_check_catches_a_misspelled_metric_in_a_rule(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tampered = _misspell(
        rulefiles.render_files, RULES.name, "tokenpulse_gpu_lost{", "tokenpulse_gpu_lsot{"
    )
    monkeypatch.setattr(rulefiles, "render_files", tampered)
    assert build.main(_args("--check")) == 1
    err = capsys.readouterr().err
    assert (
        f"{RULES}: rule TokenPulseGpuLost: tokenpulse_gpu_lsot is declared by no component" in err
    )


def test_check_catches_a_misspelled_metric_in_a_dashboard(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = "tokenpulse_gateway_circuit_breaker_state"
    tampered = _misspell(dashboards.render_all, SLO.name, old, "tokenpulse_gateway_breaker_state")
    monkeypatch.setattr(dashboards, "render_all", tampered)
    assert build.main(_args("--check")) == 1
    err = capsys.readouterr().err
    assert f"{SLO}: panel 'Circuit breaker' query A: tokenpulse_gateway_breaker_state" in err


def test_a_build_with_problems_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(tmp_path)
    before = (root / RULES).read_text()
    tampered = _misspell(rulefiles.render_files, RULES.name, "tokenpulse_gpu_lost{", "gpu_lost{")
    monkeypatch.setattr(rulefiles, "render_files", tampered)
    assert build.run(check=False, root=root) == 1
    assert "nothing written" in capsys.readouterr().err
    assert (root / RULES).read_text() == before


def test_the_old_spelling_still_parses() -> None:
    assert _args("monitoring", "--check").check
