"""The rendered overlays of deploy/k8s, shared by the deploy tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools import kustomize

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")

Doc = dict[str, Any]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[Doc]]:
    """Overlay name -> the objects `kustomize build deploy/k8s/overlays/<name>` prints."""
    return {name: kustomize.build(K8S / "overlays" / name) for name in OVERLAYS}


def find(docs: list[Doc], kind: str, name: str) -> Doc:
    """The one object of that kind and name (names with a hash suffix match by their stem)."""
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and (d["metadata"]["name"] == name or d["metadata"]["name"].rsplit("-", 1)[0] == name)
    ]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def pod_spec(doc: Doc) -> Doc:
    """The pod spec of a workload."""
    return doc["spec"]["template"]["spec"]


def containers(doc: Doc) -> list[Doc]:
    """A workload's containers, its init containers (native sidecars among them) first."""
    return [*pod_spec(doc).get("initContainers", []), *pod_spec(doc)["containers"]]


def container(doc: Doc, name: str) -> Doc:
    """One container of a workload (an init container or native sidecar too), by name."""
    (found,) = [c for c in containers(doc) if c["name"] == name]
    return found
