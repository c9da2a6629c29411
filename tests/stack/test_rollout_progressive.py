"""`tokenpulse rollout progressive` on a running stack (the component table: model server,
gateway, exporter, shipper, Prometheus) with steady traffic: a canary worse on the golden prompts
is rolled back by itself; one within the bars is promoted."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.stack import StackOptions, config_for_tests
from serving.gateway.admin import parse_canary_weight
from serving.gateway.keys import add_key
from stack.cli import main
from stack.config import StackConfig
from stack.rollout.progressive import Health, ProgressiveSettings, verdict
from stack.rollout.settings import CANARY_WEIGHT_FILE
from stack.supervise import Stack as Supervisor
from tests.support.models import install_version
from tokenpulse.tfserving.render import render_models_config

NAN = float("nan")


def test_verdict_judges_each_figure_against_stable() -> None:
    s = ProgressiveSettings(min_requests=10)
    ok = Health(requests=50, error_ratio=0.0, p99_s=0.2, golden_nll=2.0)
    assert verdict(s, ok, ok) is None
    assert "too few canary requests" in str(verdict(s, ok, dataclasses.replace(ok, requests=9)))
    assert "5xx ratio" in str(verdict(s, ok, dataclasses.replace(ok, error_ratio=0.02)))
    assert "p99 latency" in str(verdict(s, ok, dataclasses.replace(ok, p99_s=0.31)))
    assert "golden-prompt NLL" in str(verdict(s, ok, dataclasses.replace(ok, golden_nll=2.6)))
    assert "no golden-prompt NLL" in str(verdict(s, ok, dataclasses.replace(ok, golden_nll=NAN)))
    # stable without errors or latency data yet: the canary is held to zero errors only
    idle = Health(requests=0, error_ratio=NAN, p99_s=NAN, golden_nll=NAN)
    assert verdict(s, idle, dataclasses.replace(ok, golden_nll=NAN)) is None


@pytest.fixture(scope="module")
def running(
    tiny_export: Path, tiny_degraded_export: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackConfig]:
    workdir = tmp_path_factory.mktemp("progressive")
    (workdir / "logs").mkdir()
    base = workdir / "models" / "gen"
    for version, export in ((1, tiny_export), (2, tiny_degraded_export)):
        install_version(export, base, version)
    labels = {"stable": 1, "canary": 2}
    (workdir / "models.config").write_text(render_models_config("gen", base, (1, 2), labels))
    key = add_key(workdir / "gateway-keys.json", "ops", replace=True)
    config = config_for_tests(workdir, StackOptions(canary_interval_s=1.0))
    flags = {**config.extra_flags, "modelserver": ("--model_config_file_poll_wait_seconds=1",)}
    config = dataclasses.replace(config, extra_flags=flags)
    supervisor = Supervisor(config)
    stop = threading.Event()

    def traffic() -> None:  # many callers, so a weight splits them
        with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
            n = 0
            while not stop.is_set():
                body = {"prompt": "steady traffic", "max_new_tokens": 2, "user": f"u{n % 50}"}
                client.post(f"{config.url('gateway_port')}/v1/generate", json=body)
                n += 1
                stop.wait(0.05)

    try:
        supervisor.start_all()
        # both versions' request series exist before the first step, so its window counts them all
        # (Prometheus' increase() cannot count a counter's first sample)
        for label in ("stable", "canary", "stable", "canary"):
            httpx.post(
                f"{config.url('gateway_port')}/v1/generate",
                json={"prompt": "hi", "max_new_tokens": 1, "version_label": label},
                headers={"Authorization": f"Bearer {key}"}, timeout=30,
            ).raise_for_status()  # fmt: skip
        thread = threading.Thread(target=traffic, daemon=True)
        thread.start()
        yield config
    finally:
        stop.set()
        supervisor.stop_all()


def progressive(config: StackConfig, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple:
    capsys.readouterr()
    where = [f"--run-dir={config.run_dir}", f"--gateway-url={config.url('gateway_port')}"]
    if argv[0] == "progressive":
        where.append(f"--prometheus-url={config.url('prometheus_port')}")
    code = main(["rollout", *argv, *where, "--wait-s=10"])
    out, err = capsys.readouterr()
    return code, out, err


def _weight(config: StackConfig) -> float:
    return parse_canary_weight((config.run_dir / CANARY_WEIGHT_FILE).read_text())


@pytest.mark.slow
def test_a_canary_worse_on_the_golden_prompts_is_rolled_back_by_itself(
    running: StackConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # the tiny degraded export answers the golden prompts ~0.1 nats worse: a tight bar catches it
    flags = ("--step-s=10", "--window=10s", "--min-requests=3", "--max-latency-ratio=100")
    code, out, err = progressive(
        running, capsys, "progressive", "50", *flags, "--max-nll-increase=0.05"
    )
    assert code == 1, out
    assert "canary weight 50% written" in out and "canary version 2" in out
    assert err.startswith("tokenpulse rollout: error: canary version 2 failed at 50%: ")
    assert "golden-prompt NLL" in err
    assert err.endswith("rolled back (canary weight 0, stable still version 1)\n")
    assert _weight(running) == 0.0
    assert (
        "labels the gateway routes by: canary -> 2, stable -> 1"
        in progressive(running, capsys, "status")[1]
    )


@pytest.mark.slow
def test_a_canary_within_the_bars_is_promoted_after_the_last_step(
    running: StackConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same canary, judged by the default NLL bar (the CanaryWorseThanStable margin): it passes
    flags = ("--step-s=6", "--window=6s", "--min-requests=3", "--max-latency-ratio=100")
    code, out, err = progressive(running, capsys, "progressive", "50", "100", *flags)
    assert (code, err) == (0, ""), out
    assert "step 50%: the canary holds" in out and "step 100%: the canary holds" in out
    assert out.endswith("promoted: stable is version 2, canary weight back to 0%\n")
    assert _weight(running) == 0.0
    status = progressive(running, capsys, "status")[1]
    assert "canary -> 2, stable -> 2" in status and "stable before: 1" in status
