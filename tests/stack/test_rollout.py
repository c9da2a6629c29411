"""`tokenpulse rollout` on a running stack: the component table `up` starts (model server,
gateway, exporter, shipper, Prometheus), test options, versions 1 (`stable`) and 2 (`canary`, the
tiny export with noised weights). The model server polls models.config every second, the gateway
re-reads it at every status poll, as under `up` (whose polls are slower).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.stack import config_for_tests
from serving.gateway.admin import parse_canary_weight
from serving.gateway.keys import add_key
from stack.cli import main
from stack.config import StackConfig
from stack.rollout.labels import ModelsConfig, RolloutError
from stack.rollout.progressive import Health, ProgressiveSettings, verdict
from stack.rollout.settings import CANARY_WEIGHT_FILE
from stack.supervise import Supervisor
from tests.support.models import install_version
from tokenpulse.tfserving.render import render_models_config

MODEL = "gen"
NAN = float("nan")


@dataclasses.dataclass
class Running:
    config: StackConfig
    key: str
    export: Path

    @property
    def gateway_url(self) -> str:
        return self.config.url("gateway_port")

    @property
    def base(self) -> Path:
        return self.config.run_dir / "models" / MODEL


@pytest.fixture(scope="module")
def running(
    tiny_export: Path, tiny_degraded_export: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    workdir = tmp_path_factory.mktemp("rollout")
    (workdir / "logs").mkdir()
    base = workdir / "models" / MODEL
    for version, export in ((1, tiny_export), (2, tiny_degraded_export)):
        install_version(export, base, version)
    labels = {"stable": 1, "canary": 2}
    text = render_models_config(MODEL, base, (1, 2), labels, "# test stack\n")
    (workdir / "models.config").write_text(text)
    key = add_key(workdir / "gateway-keys.json", "ops", replace=True)
    config = config_for_tests(workdir, canary_interval_s=1.0)  # fast polls: labels within 1 s
    supervisor = Supervisor(config)
    try:
        supervisor.start_all()
        yield Running(config, key, tiny_export)
    finally:
        supervisor.stop_all()


def rollout(running: Running, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple:
    """Run `tokenpulse rollout ...` (the CLI entry point) against the stack: (code, out, err)."""
    capsys.readouterr()
    where = [f"--run-dir={running.config.run_dir}", f"--gateway-url={running.gateway_url}"]
    if argv[0] == "progressive":
        where.append(f"--prometheus-url={running.config.url('prometheus_port')}")
    # waits end once the condition holds; a starved machine loads a version in tens of seconds
    code = main(["rollout", *argv, *where, "--wait-s=60"])
    out, err = capsys.readouterr()
    return code, out, err


def answered_by(running: Running, user: str, **body: object) -> tuple[str, str]:
    """(version, label) the gateway's headers name for one request of `user`."""
    resp = httpx.post(
        f"{running.gateway_url}/v1/generate",
        json={"prompt": "hi", "max_new_tokens": 1, "user": user, **body},
        headers={"Authorization": f"Bearer {running.key}"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    return resp.headers["X-Model-Version"], resp.headers.get("X-Model-Version-Label", "")


def server_label(running: Running, label: str, want: int, timeout_s: float = 10.0) -> int:
    """The version the model server itself resolves `label` to, once it is `want`."""
    deadline = time.monotonic() + timeout_s
    url = running.config.url("rest_port", f"/v1/models/{MODEL}/labels/{label}/metadata")
    while True:
        version = int(httpx.get(url, timeout=5).json()["model_spec"]["version"])
        if version == want or time.monotonic() > deadline:
            return version
        time.sleep(0.2)


def weight(running: Running) -> float:
    return parse_canary_weight((running.config.run_dir / CANARY_WEIGHT_FILE).read_text())


# ---- labels, rollback, weight, serve ------------------------------------------------------------


def test_label_moves_on_gateway_and_model_server_and_rollback_undoes_it(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = rollout(running, capsys, "label", "stable", "2")
    assert (code, err) == (0, "")
    assert "stable -> version 2 (was version 1)" in out
    assert answered_by(running, "alice") == ("2", "stable")  # weight 0: everyone on stable
    assert server_label(running, "stable", 2) == 2
    text = running.config.models_config.read_text()
    assert text.startswith("# test stack\n") and '"stable": [1]' in text

    code, out, err = rollout(running, capsys, "status")
    assert code == 0
    assert "AVAILABLE versions: 1, 2" in out
    assert "labels the gateway routes by: canary -> 2, stable -> 2" in out
    assert "stable before: 1" in out

    code, out, err = rollout(running, capsys, "rollback")
    assert (code, err) == (0, "")
    assert "rolled stable back to version 1 (from 2)" in out
    assert answered_by(running, "alice") == ("1", "stable")
    assert server_label(running, "stable", 1) == 1

    code, out, err = rollout(running, capsys, "rollback")  # nothing earlier is recorded now
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "no earlier stable version of gen is recorded" in err


def test_a_version_that_is_not_available_is_refused_and_nothing_changes(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    before = running.config.models_config.read_bytes()
    code, out, err = rollout(running, capsys, "label", "stable", "7")
    assert code == 1 and out == ""
    assert err == (
        "tokenpulse rollout: error: version 7 of model 'gen' is not AVAILABLE (AVAILABLE: "
        "1, 2); TF Serving refuses a label on it, so the label stays where it is\n"
    )
    assert running.config.models_config.read_bytes() == before
    assert answered_by(running, "alice")[1] == "stable"


def test_canary_weight_shifts_the_running_gateways_traffic(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    users = [f"user-{i}" for i in range(6)]
    assert {answered_by(running, u) for u in users} == {("1", "stable")}
    code, out, _ = rollout(running, capsys, "canary-weight", "100")
    assert code == 0 and "canary weight 100% written" in out
    time.sleep(1.5)  # the gateway looks at the file every second
    assert {answered_by(running, u) for u in users} == {("2", "canary")}
    code, out, _ = rollout(running, capsys, "status")
    assert "canary weight: 100%" in out
    assert rollout(running, capsys, "canary-weight", "0")[0] == 0
    time.sleep(1.5)
    assert {answered_by(running, u) for u in users} == {("1", "stable")}


def test_bad_arguments_and_an_unreachable_gateway_are_one_line(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        rollout(running, capsys, "canary-weight", "150")
    assert exc.value.code == 2
    assert "a percentage from 0 to 100, got '150'" in capsys.readouterr().err
    code = main(
        ["rollout", "status", "--gateway-url=http://127.0.0.1:9",
         f"--run-dir={running.config.run_dir}"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("tokenpulse rollout: error: cannot reach the gateway at")


def test_serve_loads_a_new_version_beside_the_old_and_keeps_labelled_ones(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = rollout(running, capsys, "serve", "1")  # canary still points at 2
    assert code == 1 and out == ""
    assert "labels point at versions the list leaves out (canary -> 2, stable -> 1)" in err

    install_version(running.export, running.base, 3)
    code, out, err = rollout(running, capsys, "serve", "1", "2", "3")
    assert (code, err) == (0, ""), out
    assert out == f"gen: serving versions 1, 2, 3 ({running.config.models_config})\n"
    assert rollout(running, capsys, "label", "canary", "3")[0] == 0
    assert answered_by(running, "bob", version_label="canary") == ("3", "canary")
    assert rollout(running, capsys, "label", "canary", "2")[0] == 0
    code, out, _ = rollout(running, capsys, "serve", "1", "2")
    assert code == 0
    deadline = time.monotonic() + 30
    while "AVAILABLE versions: 1, 2\n" not in rollout(running, capsys, "status")[1]:
        assert time.monotonic() < deadline, "version 3 was not unloaded"
        time.sleep(0.5)


def test_up_starts_each_run_at_its_own_canary_weight(tmp_path: Path) -> None:
    from stack.up import files
    from tests.support.up import up_settings

    settings = up_settings(tmp_path)
    settings.run_dir.mkdir(parents=True)
    path = settings.run_dir / CANARY_WEIGHT_FILE
    path.write_text('{"canary_weight": 0.5}')  # what a rollout left in the last run
    files.write_models_config(settings)
    assert not path.exists()


# ---- progressive -----------------------------------------------------------------------------


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
def traffic(running: Running) -> Iterator[None]:
    """Steady requests from many callers (so a weight splits them) for the rest of the module."""
    for label in ("stable", "canary", "stable", "canary"):
        # both versions' request series exist before the first step, so its window counts them
        # all (Prometheus' increase() cannot count a counter's first sample)
        answered_by(running, "warm-up", version_label=label)
    stop = threading.Event()

    def send() -> None:
        headers = {"Authorization": f"Bearer {running.key}"}
        with httpx.Client(timeout=30, headers=headers) as client:
            n = 0
            while not stop.is_set():
                body = {"prompt": "steady traffic", "max_new_tokens": 2, "user": f"u{n % 50}"}
                try:
                    client.post(f"{running.gateway_url}/v1/generate", json=body)
                except httpx.HTTPError:
                    pass  # one slow or refused call must not end the traffic for the module
                n += 1
                stop.wait(0.05)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=30)


@pytest.mark.slow
@pytest.mark.usefixtures("traffic")
def test_a_canary_worse_on_the_golden_prompts_is_rolled_back_by_itself(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    # the tiny degraded export answers its golden prompts worse (~0.7 nats): a tight bar catches it
    flags = ("--step-s=10", "--window=10s", "--min-requests=3", "--max-latency-ratio=100")
    code, out, err = rollout(
        running, capsys, "progressive", "50", *flags, "--max-nll-increase=0.05"
    )
    assert code == 1, out
    assert "canary weight 50% written" in out and "canary version 2" in out
    assert err.startswith("tokenpulse rollout: error: canary version 2 failed at 50%: ")
    assert "golden-prompt NLL" in err
    assert err.endswith("rolled back (canary weight 0, stable still version 1)\n")
    assert weight(running) == 0.0
    status = rollout(running, capsys, "status")[1]
    assert "labels the gateway routes by: canary -> 2, stable -> 1" in status


@pytest.mark.slow
@pytest.mark.usefixtures("traffic")
def test_a_canary_within_the_bars_is_promoted_after_the_last_step(
    running: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same canary under a bar above its ~0.7 nats (at the drill's noise the subword model is
    # worse than the default bar, the CanaryWorseThanStable margin of 0.5, lets through)
    flags = ("--step-s=6", "--window=6s", "--min-requests=3", "--max-latency-ratio=100")
    code, out, err = rollout(
        running, capsys, "progressive", "50", "100", *flags, "--max-nll-increase=2"
    )
    assert (code, err) == (0, ""), out
    assert "step 50%: the canary holds" in out and "step 100%: the canary holds" in out
    assert out.endswith("promoted: stable is version 2, canary weight back to 0%\n")
    assert weight(running) == 0.0
    status = rollout(running, capsys, "status")[1]
    assert "canary -> 2, stable -> 2" in status and "stable before: 1" in status


def test_a_models_config_that_cannot_be_written_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "gone" / "models.config"
    path.parent.mkdir()
    path.write_text(render_models_config(MODEL, "/models/gen", (1,), {"stable": 1}))
    config = ModelsConfig.read(path)
    config.move(MODEL, "canary", 1)
    path.unlink()
    path.parent.rmdir()  # e.g. the bind mount went away
    with pytest.raises(RolloutError, match=r"^cannot write .*models.config: "):
        config.write()
