"""deploy/k8s renders, validates against the Kubernetes and CRD schemas, and each overlay holds
what it should."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from devtools import kustomize
from monitoring.mixin import operator
from tests.deploy.conftest import K8S, OVERLAYS, Doc, container, containers, find, pod_spec
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME

# The Kubernetes minors under upstream support (the newest three, about 14 months of patches
# each), all of which the manifests are validated against; README says the same.
KUBERNETES_VERSIONS = ("1.35.0", "1.36.0", "1.37.0")
KUBERNETES_VERSION = KUBERNETES_VERSIONS[0]
SCHEMAS = K8S / "schemas"
CRD_GROUPS = (
    "monitoring.coreos.com", "elasticsearch.k8s.elastic.co", "kibana.k8s.elastic.co",
    "gateway.networking.k8s.io", "kubeflow.org",
)  # fmt: skip


def _crd_schema(doc: Doc) -> dict:
    group, version = doc["apiVersion"].split("/")
    return json.loads((SCHEMAS / f"{group}_{version}_{doc['kind']}.json").read_text())


def _is_crd(doc: Doc) -> bool:
    return doc["apiVersion"].split("/")[0] in CRD_GROUPS


def _validate(doc: Doc, version: str = KUBERNETES_VERSION) -> None:
    if _is_crd(doc):
        jsonschema.validate(doc, _crd_schema(doc))
    else:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates(rendered: dict[str, list[Doc]], overlay: str, version: str) -> None:
    """Built-in kinds against each supported Kubernetes' own schemas (strict: unknown fields
    fail), custom resources against the vendored CRD schemas; no kind goes unchecked."""
    for doc in rendered[overlay]:
        try:
            _validate(doc, version)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as exc:
            pytest.fail(f"{overlay}: {doc['kind']}/{doc['metadata']['name']}: {exc}")


def test_the_validators_catch_a_typo(rendered: dict[str, list[Doc]]) -> None:
    deploy = copy.deepcopy(find(rendered["cpu"], "Deployment", "gateway"))
    pod_spec(deploy)["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(deploy)
    monitor = copy.deepcopy(find(rendered["cpu"], "ServiceMonitor", "tokenpulse-gateway"))
    monitor["spec"]["endpoints"][0]["scrape_timeout"] = "15s"
    with pytest.raises(jsonschema.ValidationError):
        _validate(monitor)
    am = copy.deepcopy(find(rendered["cpu"], "AlertmanagerConfig", "tokenpulse"))
    am["spec"]["route"]["routes"][0]["matchers"][0]["matchType"] = "=="
    with pytest.raises(jsonschema.ValidationError):
        _validate(am)
    am = copy.deepcopy(find(rendered["cpu"], "AlertmanagerConfig", "tokenpulse"))
    am["spec"]["inhibitRules"][0]["sourceMatch"][0]["matchType"] = "=="
    with pytest.raises(jsonschema.ValidationError):
        _validate(am)
    es = copy.deepcopy(find(rendered["cpu"], "Elasticsearch", "tokenpulse"))
    del es["spec"]["nodeSets"]
    with pytest.raises(jsonschema.ValidationError):
        _validate(es)


def test_the_crd_schemas_say_they_are_a_subset() -> None:
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        assert "subset" in schema["title"], path
        jsonschema.Draft202012Validator.check_schema(schema)
    assert "subset" in (K8S / "README.md").read_text()


EXPECTED = {
    # (kind, name) in both overlays
    "common": {
        ("Namespace", "tokenpulse"),
        ("ConfigMap", "tfserving-config"),
        ("ConfigMap", "tokenpulse-gpu-dashboard"),
        ("ConfigMap", "tokenpulse-pipeline-dashboard"),
        ("ConfigMap", "tokenpulse-quality-dashboard"),
        ("ConfigMap", "tokenpulse-training-dashboard"),
        ("ConfigMap", "tokenpulse-serving-dashboard"),
        ("ConfigMap", "tokenpulse-slo-dashboard"),
        ("Secret", "tokenpulse-es-roles"),
        ("Service", "gateway"),
        ("Service", "shipper"),
        ("Service", "tfserving"),
        ("Service", "tfserving-pods"),
        ("Deployment", "gateway"),
        ("Deployment", "tfserving"),
        ("PodDisruptionBudget", "gateway"),
        ("PodDisruptionBudget", "tfserving"),
        ("HorizontalPodAutoscaler", "gateway"),
        ("Job", "es-setup"),
        ("Elasticsearch", "tokenpulse"),
        ("Kibana", "tokenpulse"),
        ("PodMonitor", "tokenpulse-exporter"),
        ("PrometheusRule", "tokenpulse-alerts"),
        ("PrometheusRule", "tokenpulse-recording"),
        ("ServiceMonitor", "alertmanager"),
        ("ServiceMonitor", "prometheus"),
        ("ServiceMonitor", "tfserving"),
        ("ServiceMonitor", "tokenpulse-gateway"),
        ("ServiceMonitor", "tokenpulse-shipper"),
        ("AlertmanagerConfig", "tokenpulse"),
        ("Ingress", "gateway"),
        ("HTTPRoute", "gateway"),
        ("NetworkPolicy", "elasticsearch"),
        ("NetworkPolicy", "tfserving"),
        # the runbooks every alert links, served in the cluster (base/runbooks/)
        ("ConfigMap", "tokenpulse-runbooks"),
        ("Deployment", "runbooks"),
        ("Service", "runbooks"),
        ("Ingress", "runbooks"),
    },  # fmt: skip
    "cpu": set(),
    "gpu": {("DaemonSet", "exporter")},
}


def _stem(doc: Doc) -> str:
    name = doc["metadata"]["name"]
    return name.rsplit("-", 1)[0] if name.startswith("tfserving-config-") else name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_exactly_its_objects_in_one_namespace(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    assert {(d["kind"], _stem(d)) for d in docs} == EXPECTED["common"] | EXPECTED[overlay]
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "tokenpulse"
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "tokenpulse", doc["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_that_mounts_the_serving_config_gets_the_hashed_name(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    name = find(docs, "ConfigMap", "tfserving-config")["metadata"]["name"]
    assert re.fullmatch(r"tfserving-config-[a-z0-9]{10}", name)
    mounting = 0
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            for volume in pod_spec(doc).get("volumes", []):
                if volume.get("configMap", {}).get("name") == operator.RUNBOOKS_CONFIG_MAP:
                    continue  # generated, no hash: the runbooks pod re-reads the mounted files
                if "configMap" in volume:
                    assert volume["configMap"]["name"] == name, doc["metadata"]["name"]
                    mounting += 1
    # gpu: TF Serving with its exporter sidecar (the DaemonSet reads NVML only, no config)
    assert mounting == {"cpu": 2, "gpu": 2}[overlay]


def test_the_config_map_holds_serving_configs_files() -> None:
    for name in ("models.container.config", "batching_parameters.txt", "monitoring.config"):
        copy_ = K8S / "components" / "serving-config" / name
        assert copy_.read_text() == (K8S.parents[1] / "serving" / "config" / name).read_text()


def test_tf_serving_probes_resources_and_disruption_budget(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["cpu"]
    tfs = container(find(docs, "Deployment", "tfserving"), "tfserving")
    assert tfs["image"].startswith("docker.io/tensorflow/serving:")
    assert tfs["readinessProbe"]["httpGet"] == {
        "path": f"/v1/models/{DEFAULT_MODEL_NAME}",
        "port": "http",
    }
    assert tfs["livenessProbe"]["tcpSocket"] == {"port": "http"}
    assert {"requests", "limits"} <= set(tfs["resources"])
    for doc in docs:
        for c in containers(doc) if "template" in doc.get("spec", {}) else []:
            assert {"requests", "limits"} <= set(c.get("resources", {})), c["name"]
    pdb = find(docs, "PodDisruptionBudget", "tfserving")
    labels = find(docs, "Deployment", "tfserving")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_gpu_overlay_takes_a_gpu_tolerates_the_taint_and_runs_the_exporter_per_node(
    rendered: dict[str, list[Doc]],
) -> None:
    gpu, cpu = rendered["gpu"], rendered["cpu"]
    tfs = find(gpu, "Deployment", "tfserving")
    main = container(tfs, "tfserving")
    assert main["image"].endswith("-gpu")
    assert main["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert main["resources"]["limits"]["cpu"] == "4"  # the base's limits kept
    taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert taint in pod_spec(tfs)["tolerations"]
    # model status and canaries beside each replica (the sidecar, NVML off): issue 26 D.11
    assert sorted(c["name"] for c in containers(tfs)) == ["exporter", "model", "tfserving"]
    assert "--no-collector.nvml" in container(tfs, "exporter")["args"]
    # the GPUs from one NVML reader a node, which watches no replica
    exporter = find(gpu, "DaemonSet", "exporter")
    assert taint in pod_spec(exporter)["tolerations"]
    args = container(exporter, "exporter")["args"]
    assert "--collector.nvml" in args
    assert {"--no-collector.tfserving", "--no-collector.canary"} <= set(args)
    assert not [a for a in args if a.startswith("--tfserving.")]
    # CPU: the exporter is a sidecar, NVML off, no GPU anywhere
    tfs_cpu = find(cpu, "Deployment", "tfserving")
    sidecar = container(tfs_cpu, "exporter")
    assert "--no-collector.nvml" in sidecar["args"]
    assert "--tfserving.url=http://127.0.0.1:8501" in sidecar["args"]
    assert "nvidia.com/gpu" not in json.dumps(tfs_cpu)
    assert not [d for d in cpu if d["kind"] == "DaemonSet"]


def test_the_spool_is_shared_by_the_gateway_and_its_shipper_only(
    rendered: dict[str, list[Doc]],
) -> None:
    """The writer and the shipper share one pod's volume, never one across nodes: the shipper is
    a native sidecar of each gateway pod (stopped after the gateway, so it ships the last
    samples), the spool an emptyDir the writer's cap fits in."""
    from log_pipeline.settings import SinkSettings

    for overlay in OVERLAYS:
        docs = rendered[overlay]
        assert not [d for d in docs if d["kind"] == "StatefulSet"], overlay
        gateway = find(docs, "Deployment", "gateway")
        volumes = {v["name"]: v for v in pod_spec(gateway)["volumes"]}
        size = volumes["spool"]["emptyDir"]["sizeLimit"]
        assert int(size.removesuffix("Gi")) << 30 > SinkSettings.model_fields["cap_bytes"].default
        shipper = container(gateway, "shipper")
        assert shipper in pod_spec(gateway)["initContainers"], overlay
        assert shipper["restartPolicy"] == "Always" and "readinessProbe" not in shipper, overlay
        env = {e["name"]: e.get("value") for e in container(gateway, "gateway")["env"]}

        def mount(c: Doc) -> str:
            (path,) = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "spool"]
            return path

        args = shipper["args"]
        assert "--spool-root" not in args, overlay  # one writer: no directories to retire
        spool = args[args.index("--spool-dir") + 1]
        assert spool == env["TOKENPULSE_SINK_SPOOL_DIR"] == mount(shipper)
        assert mount(container(gateway, "gateway")) == spool
        shipper_env = {e["name"]: e.get("value") for e in shipper["env"]}
        assert float(shipper_env["TOKENPULSE_SHIPPER_DRAIN_TIMEOUT_S"]) > 0, overlay


def _allowed_from(policy: Doc) -> list[dict]:
    return [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]


def test_network_policies_admit_only_the_named_clients(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["gpu"]
    tfs = find(docs, "NetworkPolicy", "tfserving")
    peers = _allowed_from(tfs)
    same_ns = {p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in peers
               if "namespaceSelector" not in p}  # fmt: skip
    assert same_ns == {"gateway"}  # the exporter is TF Serving's sidecar, or reads NVML only
    (scraper,) = [p for p in peers if "namespaceSelector" in p]
    assert scraper["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    es = find(docs, "NetworkPolicy", "elasticsearch")
    clients = {json.dumps(p, sort_keys=True) for p in es["spec"]["ingress"][0]["from"]}
    wanted = [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "gateway"}}},  # its shipper
        {"podSelector": {"matchLabels": {"kibana.k8s.elastic.co/name": "tokenpulse"}}},
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "grafana"}},
        },
    ]
    assert {json.dumps(w, sort_keys=True) for w in wanted} <= clients
    # beyond those three: only what running Elasticsearch needs (README says why)
    assert len(clients) == 5


def test_monitoring_resources_are_the_generated_ones() -> None:
    kustomization = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    assert "monitoring" in kustomization["resources"]
    generated = yaml.safe_load((K8S / "base" / "monitoring" / "kustomization.yaml").read_text())
    assert generated["resources"]


def _unhash(text: str) -> list[Doc]:
    class Loader(yaml.SafeLoader):
        pass

    # kustomize prints `matchType: =` bare, which YAML 1.1 tags as a "value" token
    Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: node.value)
    text = re.sub(r"tfserving-config-[a-z0-9]{10}", "tfserving-config", text)
    return [d for d in yaml.load_all(text, Loader=Loader) if d]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_same_objects_as_kubectl_kustomize_where_it_is_installed(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    """A cross-check of the renderer where kubectl is at hand; hash suffixes aside (kubectl's
    build here prints other suffixes than kustomize's published hasher)."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the renderer's own tests still ran")
    out = subprocess.run(
        ["kubectl", "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if out.returncode != 0 and "unknown command" in out.stderr:
        pytest.skip("this kubectl has no kustomize")
    assert out.returncode == 0, out.stderr
    assert _unhash(kustomize.dump(rendered[overlay])) == _unhash(out.stdout)


def test_readme_lists_the_overlays_and_the_kubernetes_version() -> None:
    readme = (K8S / "README.md").read_text()
    minors = [v.rsplit(".", 1)[0] for v in KUBERNETES_VERSIONS]
    assert f"Kubernetes {minors[0]} to {minors[-1]}" in readme
    for overlay in OVERLAYS:
        assert f"overlays/{overlay}" in readme
    assert Path(K8S / "schemas").is_dir()
