"""TF Serving's models come from an immutable artifact: a model image built once (the
Dockerfile's `modelcar` target), copied into each replica's own volume, so every replica serves
the same bytes and no pod trains; and the opt-in ReadWriteMany path (components/models-rwx)
names its storage class or fails."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest

from devtools import kustomize
from tests.deploy.conftest import K8S, OVERLAYS, Doc, find, overlay_with, pod_spec
from tests.deploy.test_manifests import KUBERNETES_VERSION, _unhash
from tests.deploy.test_stock_cluster import (
    ROOT,
    _all_pods,
    _images,
    claim_violations,
    is_model_image,
    pod_templates,
    restricted_violations,
    split_image,
    stop_bound_s,
)
from tokenpulse.tfserving.config import parse_model_server_config

SERVED_AT = "/models"  # where TF Serving and the exporter read the versions (models.config)
RWX_CLASS_PATCH = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: models
spec:
  storageClassName: efs-sc
"""


def _model_loads(pod: Doc) -> list[Doc]:
    """The init containers that put a model image's versions on the pod's volume."""
    return [
        c
        for c in pod.get("initContainers", [])
        if c.get("restartPolicy") != "Always" and is_model_image(c["image"])
    ]


def _script(c: Doc) -> str:
    assert c["command"] == ["sh", "-c"], c["name"]
    (script,) = c["args"]
    return script


def _mount(c: Doc, volume: str) -> Doc:
    (mount,) = [m for m in c.get("volumeMounts", []) if m["name"] == volume]
    return mount


def _served_versions(docs: list[Doc]) -> tuple[str, int, tuple[int, ...]]:
    """(policy, latest's num_versions, specific versions) of the model TF Serving serves."""
    text = find(docs, "ConfigMap", "tfserving-config")["data"]["models.container.config"]
    (model,) = parse_model_server_config(text).models
    assert model.base_path == f"{SERVED_AT}/gen", model.base_path
    policy = model.version_policy
    if policy is None or policy.choice in ("", "latest"):
        return "latest", (policy.num_versions if policy else 0) or 1, ()
    return policy.choice, 0, policy.versions


def test_no_pod_trains_a_model(rendered: dict[str, list[Doc]]) -> None:
    """Training belongs to the image build: a pod that trained would take minutes to start,
    and seeded training is not bit-identical across machines (two replicas of one version
    would serve different weights)."""
    for overlay, doc, where, pod in _all_pods(rendered):
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            assert c.get("args", [])[:2] != ["model", "build"], (overlay, doc["kind"], where)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tf_serving_copies_its_versions_from_model_images(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    """Each replica copies the model images' versions into its own emptyDir before TF Serving
    starts (so no startup probe runs before a model is there); the images are tagged with the
    version they carry, and carry what models.config serves."""
    docs = rendered[overlay]
    pod = pod_spec(find(docs, "Deployment", "tfserving"))
    loads = _model_loads(pod)
    assert loads, overlay
    assert not [c for c in pod.get("initContainers", []) if c.get("restartPolicy") != "Always"
                and c not in loads]  # fmt: skip
    volumes = {v["name"]: v for v in pod["volumes"]}
    carried = []
    for load in loads:
        tag = split_image(load["image"])[2]
        assert tag.isdigit() and int(tag) > 0, (overlay, load["image"])
        carried.append(int(tag))
        mount = _mount(load, "models")
        assert "emptyDir" in volumes["models"] and not mount.get("readOnly"), overlay
        assert mount["mountPath"] != SERVED_AT, "it would hide the image's own /models"
        assert f"{mount['mountPath']}/gen" in _script(load), overlay
        # a copy, not a training run
        assert load["resources"]["limits"]["memory"].endswith("Mi"), overlay
    assert len(set(carried)) == len(carried), overlay
    for c in pod["containers"] + [c for c in pod.get("initContainers", [])
                                  if c.get("restartPolicy") == "Always"]:  # fmt: skip
        mount = _mount(c, "models")
        assert (mount["mountPath"], mount.get("readOnly")) == (SERVED_AT, True), c["name"]
    policy, latest, specific = _served_versions(docs)
    if policy == "specific":
        assert set(specific) <= set(carried), f"{overlay}: no model image carries {specific}"
    else:  # TF Serving serves the newest `latest` versions on the volume: no image for nothing
        assert len(carried) <= latest, (overlay, carried)


def _run_copy(script: str, image: Path, volume: Path) -> subprocess.CompletedProcess[str]:
    text = script.replace("/mnt/models", str(volume)).replace("/models/gen", str(image / "gen"))
    return subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=30)


def test_the_copy_is_whole_and_idempotent(rendered: dict[str, list[Doc]], tmp_path: Path) -> None:
    """Run the init container's script against a fake image and volume: a version appears only
    complete (a staging copy renamed into place; TF Serving skips a non-numeric directory), a
    restarted container that finds it copied exits 0, a staging copy a killed container left
    is replaced, and an image without a version fails loudly."""
    pod = pod_spec(find(rendered[OVERLAYS[0]], "Deployment", "tfserving"))
    script = _script(_model_loads(pod)[0])
    image, volume = tmp_path / "image", tmp_path / "volume"
    (image / "gen" / "3" / "variables").mkdir(parents=True)
    (image / "gen" / "3" / "saved_model.pb").write_bytes(b"pb")
    (image / "gen" / "3" / "variables" / "v.index").write_bytes(b"ix")
    (volume / "gen" / ".3").mkdir(parents=True)  # a copy a killed container left half done
    (volume / "gen" / ".3" / "stale").write_text("x")
    done = _run_copy(script, image, volume)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (volume / "gen").iterdir()) == ["3"]
    assert sorted(str(p.relative_to(volume / "gen" / "3"))
                  for p in (volume / "gen" / "3").rglob("*")) == [
        "saved_model.pb", "variables", "variables/v.index"]  # fmt: skip
    (volume / "gen" / "3" / "saved_model.pb").write_bytes(b"kept")
    again = _run_copy(script, image, volume)
    assert again.returncode == 0, again.stderr
    assert (volume / "gen" / "3" / "saved_model.pb").read_bytes() == b"kept"
    shutil.rmtree(image / "gen" / "3")
    empty = _run_copy(script, image, tmp_path / "other")
    assert empty.returncode != 0 and "no model version" in empty.stderr


def _dockerfile_stages() -> dict[str, tuple[str, list[str]]]:
    from tests.test_packaging import _stages

    return _stages()


def test_the_model_image_is_built_once_from_the_model_components_environment() -> None:
    """The `modelcar` target trains at image build time, in exactly the environment of the
    `model` component image (the same install lines), and carries only the exported versions
    under /models/gen, owned by the images' user."""
    from tests.test_packaging import _chain, _image

    stages = _dockerfile_stages()
    base, lines = stages["modelcar"]
    tag = split_image(base)[2]
    assert tag and tag != "latest", base
    copies = [line for line in lines if line.startswith("COPY ")]
    assert copies == ["COPY --from=model-train --chown=10001:10001 /models/gen /models/gen"]
    assert lines[-1] == "USER 10001:10001"
    train = _chain(stages, "model-train")
    # the model image's lines, its COMPONENT guard dropped (model-train is model's by design)
    env = [re.sub(r"^RUN case .* esac\s+&& ", "RUN ", line)
           for line in _image(stages, "model") if line not in ("ARG COMPONENT",)]  # fmt: skip
    assert env[-1] == 'ENTRYPOINT ["tokenpulse"]'
    assert train[: len(env) - 1] == env[:-1], "model-train must be the model image's environment"
    (build,) = [line for line in train if "tokenpulse model build" in line]
    for flag in ("--base-path /models/gen", '--version "$MODEL_VERSION"', "--no-progress"):
        assert flag in build, flag
    assert "ARG MODEL_VERSION=1" in train
    assert ROOT.joinpath("Dockerfile").read_text().count("FROM ") == len(stages)


# --- the opt-in ReadWriteMany path ------------------------------------------------------------


def _rwx(tmp_path: Path, overlay: str, *, named: bool) -> Path:
    patches = (RWX_CLASS_PATCH,) if named else ()
    return overlay_with(tmp_path, overlay, components=("models-rwx",), patches=patches)


def test_the_rwx_component_fails_until_it_names_its_class(tmp_path: Path) -> None:
    """As shipped, the component's claim carries a placeholder that is no class name: the
    check fails (and the API server refuses the claim) until an overlay names the class."""
    docs = kustomize.build(_rwx(tmp_path, "cpu", named=False))
    (violation,) = claim_violations(docs)
    assert violation.startswith("PersistentVolumeClaim/models") and "SET-" in violation


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_rwx_component_with_its_class_passes_the_stock_cluster_checks(
    tmp_path: Path, overlay: str
) -> None:
    docs = kustomize.build(_rwx(tmp_path, overlay, named=True))
    assert claim_violations(docs) == []
    claim = find(docs, "PersistentVolumeClaim", "models")
    assert (claim["spec"]["accessModes"], claim["spec"]["storageClassName"]) == (
        ["ReadWriteMany"], "efs-sc")  # fmt: skip
    for doc in docs:
        if doc["kind"] in {"PersistentVolumeClaim", "Job", "Deployment"}:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        for _, pod in pod_templates(doc):
            assert not restricted_violations(doc, pod), (overlay, doc["metadata"]["name"])
            assert pod.get("terminationGracePeriodSeconds", 30) >= stop_bound_s(pod)
        for ref in _images(doc):
            assert split_image(ref)[0] and split_image(ref)[2] not in ("", "latest"), ref
    # TF Serving reads the claim and never writes it; its model init container waits for the
    # version its image carries, which one Job copies in (with the init container's script)
    pod = pod_spec(find(docs, "Deployment", "tfserving"))
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["models"] == {"name": "models", "persistentVolumeClaim": {
        "claimName": "models", "readOnly": True}}  # fmt: skip
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        if any(m["name"] == "models" for m in c.get("volumeMounts", [])):
            assert _mount(c, "models").get("readOnly") is True, (overlay, c["name"])
    (wait,) = _model_loads(pod)
    jobs = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].startswith("model-")]
    (job,) = jobs
    (load,) = pod_spec(job)["containers"]
    tag = split_image(load["image"])[2]
    assert load["image"] == wait["image"] and job["metadata"]["name"] == f"model-load-gen-{tag}"
    assert not _mount(load, "models").get("readOnly")
    assert pod_spec(job)["volumes"][-1]["persistentVolumeClaim"] == {"claimName": "models"}
    shipped = pod_spec(find(kustomize.build(K8S / "overlays" / overlay), "Deployment", "tfserving"))
    assert _script(load) == _script(_model_loads(shipped)[0])
    assert re.search(r"until \[ -d .*/mnt/models/gen/", _script(wait)), _script(wait)


def test_the_rwx_component_renders_the_same_with_kubectl(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the renderer's own tests still ran")
    folder = _rwx(tmp_path, "gpu", named=True)
    out = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    if out.returncode != 0 and "unknown command" in out.stderr:
        pytest.skip("this kubectl has no kustomize")
    assert out.returncode == 0, out.stderr
    assert _unhash(kustomize.dump(kustomize.build(folder))) == _unhash(out.stdout)
