"""The kustomize renderer: each feature deploy/k8s uses, against hand-written expected output."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from devtools import kustomize


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


DEPLOY = """
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    spec:
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
          - {name: web, image: web:1, env: [{name: A, value: "1"}]}
          volumes:
          - {name: cfg, configMap: {name: cfg}}
"""


def test_generator_hash_names_labels_namespace_and_references(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "deploy.yaml": DEPLOY,
            "a.txt": "hello <x>\n",
            "kustomization.yaml": """
                namespace: ns
                labels:
                - pairs: {part-of: demo}
                  includeTemplates: true
                resources: [deploy.yaml]
                configMapGenerator:
                - name: cfg
                  files: [a.txt]
                  literals: [b=2]
            """,
        },
    )
    cm, deploy = kustomize.build(tmp_path)
    suffix = kustomize.name_suffix({"metadata": {"name": "cfg"}, "data": cm["data"]})
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cfg-{suffix}", "namespace": "ns", "labels": {"part-of": "demo"}},
        "data": {"a.txt": "hello <x>\n", "b": "2"},
    }
    assert deploy["metadata"] == {"name": "web", "namespace": "ns", "labels": {"part-of": "demo"}}
    assert deploy["spec"]["selector"] == {"matchLabels": {"app": "web"}}  # selectors untouched
    template = deploy["spec"]["template"]
    assert template["metadata"]["labels"] == {"app": "web", "part-of": "demo"}
    assert template["spec"]["volumes"] == [{"name": "cfg", "configMap": {"name": f"cfg-{suffix}"}}]


def test_name_suffix_is_kustomizes_encoding() -> None:
    # sha256 of {"data":{"a":"b"},"kind":"ConfigMap","name":"cfg"}, first ten hex digits
    # 6e358e770c, with 0->g 1->h 3->k a->m e->t
    assert kustomize.name_suffix({"metadata": {"name": "cfg"}, "data": {"a": "b"}}) == "6tk58t77gc"


def test_strategic_merge_patch_merges_by_key_and_puts_new_items_first(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "base/deploy.yaml": DEPLOY,
            "base/kustomization.yaml": "resources: [deploy.yaml]\n",
            "overlay/patch.yaml": """
                apiVersion: apps/v1
                kind: Deployment
                metadata: {name: web}
                spec:
                  template:
                    spec:
                      tolerations: [{key: gpu, operator: Exists}]
                      containers:
                      - name: web
                        image: web:2
                        env: [{name: B, value: "2"}]
                      - {name: side, image: side:1}
            """,
            "overlay/kustomization.yaml": """
                resources: [../base]
                patches:
                - path: patch.yaml
            """,
        },
    )
    (deploy,) = kustomize.build(tmp_path / "overlay")
    spec = deploy["spec"]["template"]["spec"]
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert spec["containers"] == [
        {"name": "side", "image": "side:1"},
        {
            "name": "web",
            "image": "web:2",
            "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}],
        },
    ]


def test_a_component_transforms_its_parents_resources_and_adds_its_own(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "base/deploy.yaml": DEPLOY,
            "base/kustomization.yaml": "resources: [deploy.yaml]\n",
            "comp/svc.yaml": """
                apiVersion: v1
                kind: Service
                metadata: {name: web}
                spec: {selector: {app: web}, ports: [{port: 80}]}
            """,
            "comp/patch.yaml": """
                apiVersion: apps/v1
                kind: Deployment
                metadata: {name: web}
                spec: {replicas: 3}
            """,
            "comp/kustomization.yaml": """
                kind: Component
                resources: [svc.yaml]
                patches: [{path: patch.yaml}]
            """,
            "overlay/kustomization.yaml": """
                namespace: prod
                resources: [../base]
                components: [../comp]
            """,
        },
    )
    svc, deploy = kustomize.build(tmp_path / "overlay")  # Service sorts before Deployment
    assert (svc["kind"], svc["metadata"]["namespace"]) == ("Service", "prod")
    assert deploy["spec"]["replicas"] == 3


def test_an_overlays_resource_keeps_the_name_a_base_generator_replaced(tmp_path: Path) -> None:
    """As in kustomize: references are renamed only where the ConfigMap was generated."""
    _write(
        tmp_path,
        {
            "base/a.txt": "x",
            "base/kustomization.yaml": "configMapGenerator: [{name: cfg, files: [a.txt]}]\n",
            "overlay/deploy.yaml": DEPLOY,
            "overlay/kustomization.yaml": "resources: [../base, deploy.yaml]\n",
        },
    )
    cm, deploy = kustomize.build(tmp_path / "overlay")
    assert cm["metadata"]["name"].startswith("cfg-")
    assert deploy["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == "cfg"


def test_legacy_order_kinds_first_then_by_group_version_kind() -> None:
    docs = [
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "a"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
    ]
    ordered = sorted(docs, key=kustomize._order)
    assert [(d["kind"], d["metadata"]["name"]) for d in ordered] == [
        ("Namespace", "a"),
        ("Service", "a"),
        ("Service", "b"),
        ("Deployment", "a"),
        ("Job", "a"),
        ("NetworkPolicy", "a"),
    ]


def test_images_set_registry_and_tag_of_every_container_in_the_overlay(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "base/deploy.yaml": DEPLOY.replace("image: web:1", "image: web")
            + "          initContainers: [{name: wait, image: web:old}, {name: x, image: other}]\n",
            "base/kustomization.yaml": "resources: [deploy.yaml]\n",
            "overlay/kustomization.yaml": """
                resources: [../base]
                images:
                - {name: web, newName: registry.example:5000/team/web, newTag: 1.2.3}
                - {name: other, newTag: "7"}
            """,
        },
    )
    (deploy,) = kustomize.build(tmp_path / "overlay")
    spec = deploy["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "registry.example:5000/team/web:1.2.3"
    assert [c["image"] for c in spec["initContainers"]] == [
        "registry.example:5000/team/web:1.2.3",
        "other:7",
    ]


@pytest.mark.parametrize(
    "kustomization, message",
    [
        ("replicas: [{name: x, count: 2}]\n", "unsupported fields"),
        ("images: [{name: x, digest: 'sha256:0'}]\n", "images support"),
        ("resources: [../outside.yaml]\n", "outside the kustomization root"),
        ("patches: [{path: p.yaml, target: {kind: Deployment}}]\n", "patches support"),
        ("labels: [{pairs: {a: b}, includeSelectors: true}]\n", "labels support"),
        ("kind: Component\n", "a Component where a Kustomization belongs"),
    ],
)
def test_what_it_does_not_do_is_an_error(tmp_path: Path, kustomization: str, message: str) -> None:
    (tmp_path / "outside.yaml").write_text("kind: X\nmetadata: {name: x}\n")
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "kustomization.yaml").write_text(kustomization)
    with pytest.raises(kustomize.KustomizeError, match=message):
        kustomize.build(tmp_path / "k")


def test_main_prints_the_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, {"deploy.yaml": DEPLOY, "kustomization.yaml": "resources: [deploy.yaml]\n"})
    assert kustomize.main([str(tmp_path)]) == 0
    (doc,) = yaml.safe_load_all(capsys.readouterr().out)
    assert doc["metadata"]["name"] == "web"
    assert kustomize.main([str(tmp_path / "missing")]) == 1
