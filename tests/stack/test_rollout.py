"""`tokenpulse rollout` against a real model server and gateway over loopback.

Versions 1 (`stable`) and 2 (`canary`) of the tiny model are served; the model server polls its
models.config every second and the gateway re-reads it at every status poll, as under `up`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from stack.cli import main
from stack.launch import running_modelserver
from stack.rollout.settings import CANARY_WEIGHT_FILE
from tests.support.gateway import make_keys_file, running_gateway
from tests.support.models import install_version
from tokenpulse.tfserving.render import render_models_config

MODEL = "gen"


@dataclass
class Served:
    models_config: Path
    weight_file: Path
    gateway_url: str
    modelserver_url: str
    key: str
    base: Path
    export: Path


@pytest.fixture(scope="module")
def served(tiny_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("rollout")
    base = tmp / MODEL
    for version in (1, 2):
        install_version(tiny_export, base, version)
    config = tmp / "models.config"
    config.write_text(
        render_models_config(MODEL, base, (1, 2), {"stable": 1, "canary": 2}, "# test stack\n")
    )
    keys = make_keys_file(tmp / "keys.json", ops={})
    weight = tmp / "canary-weight.json"
    with (
        running_modelserver(
            config_file=config, extra_args=["--model_config_file_poll_wait_seconds=1"]
        ) as ms,
        running_gateway(
            ms.rest_url, tmp / "keys.json", model_config_file=str(config),
            canary_weight_file=str(weight), status_poll_interval_s=0.3,
        ) as gw,
    ):  # fmt: skip
        yield Served(config, weight, gw.url, ms.rest_url, keys["ops"], base, tiny_export)


def rollout(served: Served, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `tokenpulse rollout ...` (the CLI entry point) against the served pair."""
    capsys.readouterr()
    code = main(
        [
            "rollout", *argv, f"--gateway-url={served.gateway_url}",
            f"--model-config-file={served.models_config}",
            f"--canary-weight-file={served.weight_file}", "--wait-s=10",
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, out, err


def answered_by(served: Served, user: str) -> tuple[str, str]:
    """(version, label) the gateway's headers name for one request of `user`."""
    resp = httpx.post(
        f"{served.gateway_url}/v1/generate",
        json={"prompt": "hi", "max_new_tokens": 1, "user": user},
        headers={"Authorization": f"Bearer {served.key}"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    return resp.headers["X-Model-Version"], resp.headers.get("X-Model-Version-Label", "")


def server_label(served: Served, label: str, want: int, timeout_s: float = 10.0) -> int:
    """The version the model server itself resolves `label` to, once it is `want`."""
    deadline = time.monotonic() + timeout_s
    url = f"{served.modelserver_url}/v1/models/{MODEL}/labels/{label}/metadata"
    while True:
        version = int(httpx.get(url, timeout=5).json()["model_spec"]["version"])
        if version == want or time.monotonic() > deadline:
            return version
        time.sleep(0.2)


def test_label_moves_on_gateway_and_model_server_and_rollback_undoes_it(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = rollout(served, capsys, "label", "stable", "2")
    assert (code, err) == (0, "")
    assert "stable -> version 2 (was version 1)" in out
    assert answered_by(served, "alice") == ("2", "stable")  # weight 0: everyone on stable
    assert server_label(served, "stable", 2) == 2
    text = served.models_config.read_text()
    assert text.startswith("# test stack\n") and '"stable": [1]' in text

    code, out, err = rollout(served, capsys, "status")
    assert code == 0
    assert "AVAILABLE versions: 1, 2" in out
    assert "labels the gateway routes by: canary -> 2, stable -> 2" in out
    assert "stable before: 1" in out

    code, out, err = rollout(served, capsys, "rollback")
    assert (code, err) == (0, "")
    assert "rolled stable back to version 1 (from 2)" in out
    assert answered_by(served, "alice") == ("1", "stable")
    assert server_label(served, "stable", 1) == 1

    code, out, err = rollout(served, capsys, "rollback")  # nothing earlier is recorded now
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "no earlier stable version of gen is recorded" in err


def test_a_version_that_is_not_available_is_refused_and_nothing_changes(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    before = served.models_config.read_bytes()
    code, out, err = rollout(served, capsys, "label", "stable", "7")
    assert code == 1 and out == ""
    assert err == (
        "tokenpulse rollout: error: version 7 of model 'gen' is not AVAILABLE (AVAILABLE: "
        "1, 2); TF Serving refuses a label on it, so the label stays where it is\n"
    )
    assert served.models_config.read_bytes() == before
    assert answered_by(served, "alice")[1] == "stable"


def test_canary_weight_shifts_the_running_gateways_traffic(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    users = [f"user-{i}" for i in range(6)]
    assert {answered_by(served, u) for u in users} == {("1", "stable")}
    code, out, _ = rollout(served, capsys, "canary-weight", "100")
    assert code == 0 and "canary weight 100% written" in out
    time.sleep(1.5)  # the gateway looks at the file every second
    assert {answered_by(served, u) for u in users} == {("2", "canary")}
    code, out, _ = rollout(served, capsys, "status")
    assert "canary weight: 100%" in out
    assert rollout(served, capsys, "canary-weight", "0")[0] == 0
    time.sleep(1.5)
    assert {answered_by(served, u) for u in users} == {("1", "stable")}


def test_bad_arguments_and_an_unreachable_gateway_are_one_line(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        rollout(served, capsys, "canary-weight", "150")
    assert exc.value.code == 2
    assert "a percentage from 0 to 100, got '150'" in capsys.readouterr().err
    capsys.readouterr()
    code = main(
        ["rollout", "status", "--gateway-url=http://127.0.0.1:9",
         f"--model-config-file={served.models_config}"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("tokenpulse rollout: error: cannot reach the gateway at")


def test_serve_loads_a_new_version_beside_the_old_and_keeps_labelled_ones(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = rollout(served, capsys, "serve", "1")  # canary still points at 2
    assert code == 1 and out == ""
    assert "labels point at versions the list leaves out (canary -> 2, stable -> 1)" in err

    install_version(served.export, served.base, 3)
    code, out, err = rollout(served, capsys, "serve", "1", "2", "3")
    assert (code, err) == (0, ""), out
    assert out == f"gen: serving versions 1, 2, 3 ({served.models_config})\n"
    assert rollout(served, capsys, "label", "canary", "3")[0] == 0
    assert rollout(served, capsys, "label", "canary", "2")[0] == 0
    code, out, _ = rollout(served, capsys, "serve", "1", "2")
    assert code == 0
    deadline = time.monotonic() + 30
    while "AVAILABLE versions: 1, 2\n" not in rollout(served, capsys, "status")[1]:
        assert time.monotonic() < deadline, "version 3 was not unloaded"
        time.sleep(0.5)


def test_up_starts_each_run_at_its_own_canary_weight(tmp_path: Path) -> None:
    from stack.up import files
    from tests.support.up import up_settings

    settings = up_settings(tmp_path)
    settings.run_dir.mkdir(parents=True)
    weight = settings.run_dir / CANARY_WEIGHT_FILE
    weight.write_text('{"canary_weight": 0.5}')  # what a rollout left in the last run
    files.write_models_config(settings)
    assert not weight.exists()
