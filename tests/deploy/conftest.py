"""The rendered overlays of deploy/k8s, shared by the deploy tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import kustomize
from tokenpulse.paths import ROOT

K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")

Doc = dict[str, Any]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[Doc]]:
    """Overlay name -> the objects `kustomize build deploy/k8s/overlays/<name>` prints."""
    return {name: kustomize.build(K8S / "overlays" / name) for name in OVERLAYS}


def overlay_with(
    tmp_path: Path,
    overlay: str,
    *,
    components: tuple[str, ...] = (),
    patches: tuple[str, ...] = (),
    images: tuple[Doc, ...] = (),
) -> Path:
    """A platform team's own overlay: a copy of `overlay`'s kustomization (its images block
    included, plus `images`) with more components of deploy/k8s/components and more patches
    (YAML texts). Returns its folder, for `kustomize.build` or `kubectl kustomize`."""
    source = K8S / "overlays" / overlay
    folder = tmp_path / f"{overlay}-{'-'.join(components) or 'copy'}"
    folder.mkdir()
    k = yaml.safe_load((source / "kustomization.yaml").read_text())
    k["resources"] = [os.path.relpath(source / r, folder) for r in k.get("resources", [])]
    k["components"] = [os.path.relpath(source / c, folder) for c in k.get("components", [])]
    k["components"] += [os.path.relpath(K8S / "components" / c, folder) for c in components]
    k["images"] = [*k.get("images", []), *images]
    for entry in k.get("patches", []):  # patch files must lie under the kustomization root
        shutil.copy(source / entry["path"], folder / entry["path"])
    for i, text in enumerate(patches):
        (folder / f"patch-{i}.yaml").write_text(text)
        k.setdefault("patches", []).append({"path": f"patch-{i}.yaml"})
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(k, sort_keys=False))
    return folder


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
