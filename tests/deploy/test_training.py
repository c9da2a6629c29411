"""Training in the cluster (components/training, training-tfjob, training-export): every object
validates against Kubernetes' and the vendored CRD schemas and passes the stock-cluster checks,
and the Indexed Job's pods, Service, TF_CONFIG, PodMonitor and export agree with each other and
with the CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest

from devtools import kustomize
from monitoring.mixin import operator
from serving.model.settings import ExportSettings, TrainSettings
from serving.model.worker import cluster_of, indexed_job_hosts
from stack.cli import build_parser
from tests.deploy.conftest import OVERLAYS, Doc, find, overlay_with, pod_spec
from tests.deploy.test_manifests import KUBERNETES_VERSIONS, _validate
from tests.deploy.test_stock_cluster import (
    claim_violations,
    pod_templates,
    restricted_violations,
    split_image,
)
from tokenpulse import ports
from tokenpulse.settings_cli import settings_from_args

CLASSES = tuple(
    f"{{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {{name: {claim}}}, "
    f"spec: {{storageClassName: efs-sc}}}}"
    for claim in ("models", "training-run")
)
MODEL = {"name": "tokenpulse-model", "newName": "ghcr.io/tokenpulse/tokenpulse-model",
         "newTag": "0.1.0"}  # fmt: skip
INDEXED = ("models-rwx", "training", "training-export")
TFJOB = ("models-rwx", "training-tfjob", "training-export")


def _render(tmp_path: Path, overlay: str, components: tuple[str, ...], named: bool = True):
    folder = overlay_with(tmp_path, overlay, components=components,
                          patches=CLASSES if named else (), images=(MODEL,))  # fmt: skip
    return kustomize.build(folder)


def _worker(doc: Doc) -> Doc:
    return pod_spec(doc)["containers"][0]


def _env(c: Doc) -> dict[str, Doc]:
    return {e["name"]: e for e in c.get("env", [])}


def _parse(model: type, argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return settings_from_args(model, build_parser(argv).parse_args(argv))


@pytest.mark.parametrize("components", [INDEXED, TFJOB], ids=["indexed-job", "tfjob"])
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_training_object_validates_and_passes_the_stock_cluster_checks(
    tmp_path: Path, overlay: str, components: tuple[str, ...]
) -> None:
    docs = _render(tmp_path, overlay, components)
    assert claim_violations(docs) == []
    ours = [d for d in docs if d["metadata"]["name"] in {"tokenpulse-training", "training-run",
                                                         "model-export-gen-2"}]  # fmt: skip
    kinds = {d["kind"] for d in ours}
    assert {"PersistentVolumeClaim", "PodMonitor", "Job"} <= kinds
    assert ("TFJob" in kinds) == (components == TFJOB)
    for doc in ours:
        for version in KUBERNETES_VERSIONS:
            _validate(doc, version)
        for where, pod in pod_templates(doc):
            assert not restricted_violations(doc, pod), (doc["metadata"]["name"], where)
            if doc["kind"] == "TFJob":  # the CRD leaves the template free-form: check it here
                template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"},
                            "spec": pod}  # fmt: skip
                kubernetes_validate.validate(template, KUBERNETES_VERSIONS[0], strict=True)
            for c in pod["containers"]:
                registry, _, tag = split_image(c["image"])
                assert registry and tag not in ("", "latest"), c["image"]


def test_the_training_claim_fails_until_it_names_its_class(tmp_path: Path) -> None:
    docs = _render(tmp_path, "cpu", ("training",), named=False)
    (violation,) = claim_violations(docs)
    assert violation.startswith("PersistentVolumeClaim/training-run") and "SET-" in violation


def test_the_two_ways_to_train_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(kustomize.KustomizeError, match="defined twice"):
        _render(tmp_path, "cpu", ("training", "training-tfjob"))


def test_the_indexed_jobs_pods_derive_one_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """parallelism = completions = the hosts listed; pod i is <job>-<i>.<service>, its index
    from the completion-index annotation; the worker's flags and env parse with the CLI and
    make worker i's TF_CONFIG."""
    docs = _render(tmp_path, "cpu", INDEXED)
    job, svc = (
        find(docs, "Job", "tokenpulse-training"),
        find(docs, "Service", "tokenpulse-training"),
    )
    spec, pod, worker = job["spec"], pod_spec(job), _worker(job)
    n = spec["completions"]
    assert (spec["completionMode"], spec["parallelism"]) == ("Indexed", n)
    assert pod["subdomain"] == svc["metadata"]["name"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (grpc,) = svc["spec"]["ports"]
    assert {"name": "grpc", "containerPort": grpc["port"]} in worker["ports"]
    env = _env(worker)
    assert env["TOKENPULSE_MODEL_WORKER_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']")  # fmt: skip
    hosts = indexed_job_hosts(job["metadata"]["name"], svc["metadata"]["name"], n, grpc["port"])
    assert env["TOKENPULSE_MODEL_WORKER_HOSTS"]["value"] == ",".join(hosts)
    plain = {k: e["value"] for k, e in env.items() if "value" in e}
    settings = _parse(TrainSettings, worker["args"],
                      {**plain, "TOKENPULSE_MODEL_WORKER_INDEX": "1"}, monkeypatch)  # fmt: skip
    config, index, count = cluster_of(settings, {})
    assert json.loads(config)["cluster"]["worker"] == hosts and (index, count) == (1, n)
    assert settings.metrics_port == ports.TRAINING_METRICS


def test_the_tfjob_joins_the_operators_tf_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tfjob = find(_render(tmp_path, "cpu", TFJOB), "TFJob", "tokenpulse-training")
    worker_spec = tfjob["spec"]["tfReplicaSpecs"]["Worker"]
    (c,) = worker_spec["template"]["spec"]["containers"]
    assert c["name"] == "tensorflow"  # the operator's default container, whose port it names
    assert {"name": "tfjob-port", "containerPort": 2222} in c["ports"]
    settings = _parse(TrainSettings, c["args"], {}, monkeypatch)
    assert settings.tf_config and settings.metrics_port == ports.TRAINING_METRICS
    hosts = [f"tokenpulse-training-worker-{i}.tokenpulse.svc:2222" for i in range(2)]
    given = {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": 1}}
    assert cluster_of(settings, {"TF_CONFIG": json.dumps(given)})[1:] == (1, 2)
    assert worker_spec["replicas"] == 2


@pytest.mark.parametrize("components", [INDEXED, TFJOB], ids=["indexed-job", "tfjob"])
def test_the_pod_monitor_scrapes_every_worker_as_tokenpulse_training(
    tmp_path: Path, components: tuple[str, ...]
) -> None:
    docs = _render(tmp_path, "cpu", components)
    monitor = find(docs, "PodMonitor", "tokenpulse-training")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"
    assert {"action": "replace", "targetLabel": "job",
            "replacement": "tokenpulse-training"} in endpoint["relabelings"]  # fmt: skip
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "tokenpulse-training"}
    (workload,) = [d for d in docs if d["metadata"]["name"] == "tokenpulse-training"
                   and d["kind"] in {"Job", "TFJob"}]  # fmt: skip
    ((_, pod),) = pod_templates(workload)
    template = (workload["spec"]["template"] if workload["kind"] == "Job"
                else workload["spec"]["tfReplicaSpecs"]["Worker"]["template"])  # fmt: skip
    assert selector.items() <= template["metadata"]["labels"].items()
    (c,) = pod["containers"]
    assert {"name": "metrics", "containerPort": ports.TRAINING_METRICS} in c["ports"]
    # the run the monitor labels its series with: the workload's own name
    run = template["metadata"]["labels"][operator.TRAINING_RUN_LABEL]
    assert run == workload["metadata"]["name"]
    # each worker listens on, and is scraped at, its pod's IP (not its loopback)
    host = _env(c)["TOKENPULSE_MODEL_METRICS_HOST"]
    assert host == {"name": "TOKENPULSE_MODEL_METRICS_HOST",
                    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}  # fmt: skip
    # only the training pods carry the label: the monitor selects nothing else
    others = [d for d in docs if d is not workload for _, p in pod_templates(d)
              if selector.items() <= d["spec"].get("template", {}).get("metadata", {})
              .get("labels", {}).items()]  # fmt: skip
    assert others == []


def test_the_export_job_writes_the_runs_newest_checkpoint_onto_the_models_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _render(tmp_path, "cpu", INDEXED)
    export, train = (
        find(docs, "Job", "model-export-gen-2"),
        find(docs, "Job", "tokenpulse-training"),
    )
    settings = _parse(ExportSettings, _worker(export)["args"], {}, monkeypatch)
    trained = _parse(TrainSettings, _worker(train)["args"], {}, monkeypatch)
    assert settings.checkpoint == "latest" and settings.run_path() == trained.run_path()
    assert settings.preset == trained.preset
    assert export["metadata"]["name"] == f"model-export-gen-{settings.version}"
    mounts = {m["name"]: m for m in _worker(export)["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(export)["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == "models"
    assert settings.base_path.is_relative_to(mounts["models"]["mountPath"])
    assert not mounts["models"].get("readOnly") and mounts["training-run"]["readOnly"]
    find(docs, "PersistentVolumeClaim", "models")  # the serving side's claim (models-rwx)


def test_the_tfjob_schema_catches_a_typo(tmp_path: Path) -> None:
    tfjob = find(_render(tmp_path, "cpu", TFJOB), "TFJob", "tokenpulse-training")
    typos = ((("spec", "tfReplicaSpecs", "Workers"), {}),
             (("spec", "runPolicy", "cleanPodPolicy"), "Sometimes"),
             (("spec", "tfReplicaSpecs", "Worker", "restart_policy"), "Never"))  # fmt: skip
    for path, value in typos:
        bad = copy.deepcopy(tfjob)
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            _validate(bad)
