"""Every image the compose files run names a version, never `:latest` (which compose pulls or
rebuilds as whatever is newest): TokenPulse's own carry the package's version, as the Kubernetes
overlays' `images:` blocks do."""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.deploy.conftest import ROOT
from tests.deploy.test_stock_cluster import split_image

COMPOSE_FILES = sorted(ROOT.glob("docker-compose*.yml"))


def _resolve(ref: str) -> str:
    """`${VAR:-default}` as compose resolves it with VAR unset."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", ref)


def compose_images() -> list[tuple[str, str, str]]:
    """(file, service, image) of every service that names an image."""
    found = []
    for path in COMPOSE_FILES:
        for name, svc in yaml.safe_load(path.read_text())["services"].items():
            if "image" in svc:
                found.append((path.name, name, _resolve(svc["image"])))
    return found


def test_no_compose_image_is_latest_or_untagged() -> None:
    images = compose_images()
    assert len(images) >= 10 and len(COMPOSE_FILES) >= 2
    bad = [i for i in images if split_image(i[2])[2] in ("", "latest")]
    assert not bad, bad


def test_tokenpulse_compose_images_carry_the_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    ours = [i for i in compose_images() if split_image(i[2])[1].startswith("tokenpulse-")]
    assert len(ours) >= 5
    for file, service, image in ours:
        assert split_image(image)[2] == version, (file, service, image)


def test_the_check_catches_latest_and_untagged() -> None:
    assert split_image(_resolve("tokenpulse-gateway:latest"))[2] == "latest"
    assert split_image(_resolve("grafana/grafana"))[2] == ""
    assert split_image(_resolve("x/es:${ELASTIC_VERSION:-9.2.1}"))[2] == "9.2.1"
