"""docker-compose.yml: valid for docker-compose, and every command matches the project's CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tokenpulse.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compose() -> dict:
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose is not installed (make test installs it)")
    out = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "-f", "docker-compose.gpu.yml", "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return yaml.safe_load(out.stdout)


def test_services_and_gpu_reservations(compose: dict) -> None:
    services = compose["services"]
    assert {"model-build", "tfserving", "gateway", "exporter"} <= set(services)
    assert services["tfserving"]["image"].startswith("tensorflow/serving:")
    devices = services["tfserving"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]


def test_tf_serving_flags_are_ones_the_local_server_accepts_too(compose: dict) -> None:
    flags = compose["services"]["tfserving"]["command"]
    local = build_parser().parse_args(["modelserver", *flags])  # same flags, same meaning
    assert local.command == "modelserver"
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name.endswith("_file"):
            path = flag.split("=", 1)[1].replace("/config/", "serving/config/")
            assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("service", ["model-build", "gateway", "exporter"])
def test_project_commands_parse_with_the_cli(compose: dict, service: str) -> None:
    args = build_parser().parse_args(compose["services"][service]["command"])
    assert args.command in {"model", "gateway", "exporter"}
