"""Every port, metric, label, env var, file and name the manifests reference exists where it
should: in the component settings, tokenpulse.ports, the metric catalogue, the CLI, the mixin,
and the other manifests (as tests/test_compose.py does for docker-compose.yml)."""

from __future__ import annotations

import importlib
import math
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic_settings import BaseSettings

from log_pipeline import assets
from monitoring import deploy_links
from monitoring.mixin import operator
from monitoring.mixin.config import DEFAULT as config
from serving.gateway.settings import GatewaySettings
from stack.catalogue import declared_metrics
from stack.cli import build_parser
from tests.deploy.conftest import K8S, OVERLAYS, Doc, container, containers, find, pod_spec
from tokenpulse import ports

SETTINGS_MODULES = (
    "serving.gateway.settings",
    "exporter.settings",
    "log_pipeline.settings",
    "serving.model.settings",
)
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
# The Services ECK creates for the resources named tokenpulse, and their ports.
ECK_SERVICES = {"tokenpulse-es-http": {9200}, "tokenpulse-kb-http": {5601}}


def _workloads(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] in WORKLOADS]


def _containers(docs: list[Doc]) -> list[tuple[Doc, Doc]]:
    return [(d, c) for d in _workloads(docs) for c in containers(d)]


def _project(c: Doc) -> bool:
    return "/tokenpulse-" in c["image"]


def _settings_fields() -> set[str]:
    known: set[str] = set()
    for module_name in SETTINGS_MODULES:
        for obj in vars(importlib.import_module(module_name)).values():
            if isinstance(obj, type) and issubclass(obj, BaseSettings) and obj is not BaseSettings:
                prefix = obj.model_config.get("env_prefix", "")
                known |= {f"{prefix}{name}".upper() for name in obj.model_fields}
    return known


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_tokenpulse_variable_is_a_setting(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    known = _settings_fields()
    used = [e["name"] for _, c in _containers(rendered[overlay]) for e in c.get("env", [])]
    tokenpulse = [name for name in used if name.startswith("TOKENPULSE_")]
    assert tokenpulse and set(tokenpulse) <= known, set(tokenpulse) - known


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_project_commands_parse_with_the_cli(rendered: dict[str, list[Doc]], overlay: str) -> None:
    """The image's entrypoint is `tokenpulse`: each container's args are a command line."""
    for doc, c in _containers(rendered[overlay]):
        if _project(c) and "command" not in c:  # `command`: a shell step (es-setup's CA bundle)
            args = build_parser(c["args"]).parse_args(c["args"])
            assert args.command == c["args"][0], doc["metadata"]["name"]


def test_each_command_runs_in_the_image_compose_runs_it_in(rendered: dict[str, list[Doc]]) -> None:
    """The slim per-component images: the same image for the same command as docker-compose.yml."""
    compose = yaml.safe_load((K8S.parents[1] / "docker-compose.yml").read_text())["services"]
    images = {s["command"][0]: s["image"] for s in compose.values() if "command" in s}
    images["tfserving"] = compose["tfserving"]["image"]
    for overlay in OVERLAYS:
        for doc, c in _containers(rendered[overlay]):
            if "command" in c:  # a shell step in a project image, e.g. es-setup's CA bundle
                assert _project(c), (overlay, doc["metadata"]["name"], c["name"])
                continue
            command = c["args"][0] if _project(c) else "tfserving"
            wanted = images[command]
            if command == "tfserving" and overlay == "gpu":
                wanted += "-gpu"
            if command != "tfserving":  # the overlays' `images:` set registry and version
                wanted = wanted.partition(":")[0] + ":"
            assert f"/{wanted}" in c["image"], (overlay, doc["metadata"]["name"], c["name"])


def _expanded(c: Doc) -> list[str]:
    """A container's args with $(VAR) expanded as the kubelet does (literal and CPU-limit vars)."""
    values = {}
    for env in c.get("env", []):
        ref = env.get("valueFrom", {}).get("resourceFieldRef", {})
        if "value" in env:
            values[env["name"]] = env["value"]
        elif ref.get("resource") == "limits.cpu" and str(ref.get("divisor", "1")) == "1":
            limit = str(c["resources"]["limits"]["cpu"])
            cpus = int(limit[:-1]) / 1000 if limit.endswith("m") else float(limit)
            values[env["name"]] = str(math.ceil(cpus))  # the downward API rounds up
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], str(a)) for a in c["args"]]


def test_tf_serving_flags_are_ones_the_local_server_accepts_and_files_it_has(
    rendered: dict[str, list[Doc]],
) -> None:
    docs = rendered["cpu"]
    flags = _expanded(container(find(docs, "Deployment", "tfserving"), "tfserving"))
    local = build_parser(["modelserver", *flags]).parse_args(["modelserver", *flags])
    assert local.command == "modelserver"
    keys = set(find(docs, "ConfigMap", "tfserving-config")["data"])
    files = {f.split("=", 1)[1] for f in flags if f.split("=", 1)[0].endswith("_file")}
    assert {f.removeprefix("/config/") for f in files} <= keys
    for _, c in _containers(docs):  # every /config/<file> anyone names is in the ConfigMap
        for word in [*c.get("args", []), *(e.get("value", "") for e in c.get("env", []))]:
            for path in re.findall(r"/config/([\w.]+)", str(word)):
                assert path in keys, (c["name"], path)


def _container_ports(docs: list[Doc]) -> dict[str, dict[str, int]]:
    """Workload name -> port name -> container port, every container of its pods."""
    return {
        d["metadata"]["name"]: {
            p["name"]: p["containerPort"] for c in containers(d)
            for p in c.get("ports", [])
        }
        for d in _workloads(docs)
    }  # fmt: skip


def test_ports_are_the_components_defaults(rendered: dict[str, list[Doc]]) -> None:
    for overlay in OVERLAYS:
        found = _container_ports(rendered[overlay])
        assert found["tfserving"]["grpc"] == ports.MODELSERVER_GRPC
        assert found["tfserving"]["http"] == ports.MODELSERVER_REST
        assert found["gateway"]["http"] == ports.GATEWAY
        assert found["gateway"]["metrics"] == ports.SHIPPER  # the shipper, its sidecar
        exporter = found.get("exporter") or found["tfserving"]
        assert exporter["exporter"] == ports.EXPORTER
    docs = rendered["cpu"]
    gateway = container(find(docs, "Deployment", "gateway"), "gateway")
    env = {e["name"]: e.get("value") for e in gateway["env"]}
    assert int(env["TOKENPULSE_GATEWAY_PORT"]) == ports.GATEWAY
    shipper = container(find(docs, "Deployment", "gateway"), "shipper")["args"]
    assert int(shipper[shipper.index("--metrics-port") + 1]) == ports.SHIPPER
    sidecar = container(find(docs, "Deployment", "tfserving"), "exporter")["args"]
    assert f"--web.listen-address=:{ports.EXPORTER}" in sidecar


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and selector.items() <= labels.items()


def _pod_labels(docs: list[Doc]) -> list[tuple[Doc, dict[str, str]]]:
    return [(d, d["spec"]["template"]["metadata"]["labels"]) for d in _workloads(docs)]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_select_pods_and_service_ports_exist(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    pods = _pod_labels(docs)
    named = _container_ports(docs)
    for doc in docs:
        kind = doc["kind"]
        if kind in ("Deployment", "StatefulSet", "DaemonSet"):
            assert _selects(doc["spec"]["selector"]["matchLabels"], pod_spec_labels(doc))
        if kind in ("Service", "PodDisruptionBudget", "NetworkPolicy"):
            selector = (
                doc["spec"]["selector"] if kind == "Service" else
                (doc["spec"].get("selector") or doc["spec"].get("podSelector"))["matchLabels"]
            )  # fmt: skip
            if selector.get("elasticsearch.k8s.elastic.co/cluster-name"):
                continue  # ECK's pods
            targets = [d for d, labels in pods if _selects(selector, labels)]
            assert targets, (kind, doc["metadata"]["name"])
            if kind == "Service":
                for port in doc["spec"]["ports"]:
                    for target in targets:
                        assert port["targetPort"] in named[target["metadata"]["name"]], port


def pod_spec_labels(doc: Doc) -> dict[str, str]:
    """A workload's pod template labels."""
    return doc["spec"]["template"]["metadata"]["labels"]


def _services(docs: list[Doc]) -> dict[str, set[int]]:
    found = {d["metadata"]["name"]: {p["port"] for p in d["spec"]["ports"]}
             for d in docs if d["kind"] == "Service"}  # fmt: skip
    return {**found, **ECK_SERVICES}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_in_cluster_url_names_a_service_and_its_port(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    services = _services(docs)
    urls = []
    for _, c in _containers(docs):
        words = [*c.get("args", []), *(e.get("value", "") for e in c.get("env", []))]
        urls += re.findall(r"https?://[\w.-]+:\d+", " ".join(str(w) for w in words))
    assert urls
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname in ("127.0.0.1", "localhost"):
            continue  # a sidecar: the pod's own container port
        assert parts.port in services[str(parts.hostname)], url
    sidecar = find(docs, "Deployment", "tfserving")
    for c in containers(sidecar):
        for url in re.findall(r"http://127\.0\.0\.1:(\d+)", " ".join(c.get("args", []))):
            assert int(url) in _container_ports([sidecar])["tfserving"].values()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_monitor_selects_one_scrape_target_with_its_port(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    for monitor in (d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")):
        selector = monitor["spec"]["selector"]["matchLabels"]
        if "namespaceSelector" in monitor["spec"]:
            continue  # Alertmanager and Prometheus: the operator's Services
        job = monitor["metadata"]["name"]
        assert selector == {operator.MONITOR_LABEL: job}
        assert job in vars(config.jobs).values()
        if monitor["kind"] == "ServiceMonitor":
            (endpoint,) = monitor["spec"]["endpoints"]
            services = [d for d in docs if d["kind"] == "Service"
                        and _selects(selector, d["metadata"].get("labels", {}))]  # fmt: skip
            assert len(services) == 1, (job, services)  # each pod scraped once
            assert endpoint["port"] in {p["name"] for p in services[0]["spec"]["ports"]}
        else:
            (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
            pods = [d for d, labels in _pod_labels(docs) if _selects(selector, labels)]
            # the sidecar's pods; on the GPU overlay the DaemonSet's too (NVML only)
            assert 1 <= len(pods) <= 2, job
            for pod in pods:
                assert endpoint["port"] in _container_ports(pods)[pod["metadata"]["name"]]


def test_autoscaling_metrics_are_declared_served_and_below_the_limits(
    rendered: dict[str, list[Doc]],
) -> None:
    hpa = find(rendered["cpu"], "HorizontalPodAutoscaler", "gateway")
    names = [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]]
    assert names == list(operator.AUTOSCALING_METRICS)
    assert set(names) <= declared_metrics()
    values = yaml.safe_load((K8S / "prometheus-adapter" / "values.yaml").read_text())
    assert [r["name"]["as"] for r in values["rules"]["custom"]] == names
    # a ratio: its target below 1, so replicas are added before a gateway's admission is full
    (target,) = [m["pods"]["target"]["averageValue"] for m in hpa["spec"]["metrics"]]
    assert 0 < int(target.removesuffix("m")) / 1000 < 1, target
    assert hpa["spec"]["scaleTargetRef"]["name"] == "gateway"


def test_ingress_timeout_covers_the_longest_deadline(rendered: dict[str, list[Doc]]) -> None:
    ingress = find(rendered["cpu"], "Ingress", "gateway")
    timeout = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]
    assert float(timeout) >= GatewaySettings.model_fields["max_request_timeout_s"].default
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] in _services(rendered["cpu"])


def _roles(docs: list[Doc]) -> dict[str, Any]:
    secret = find(docs, "Secret", "tokenpulse-es-roles")
    return yaml.safe_load(secret["stringData"]["roles.yml"])


def test_elasticsearch_users_have_least_privilege_on_the_samples_stream(
    rendered: dict[str, list[Doc]],
) -> None:
    docs = rendered["cpu"]
    roles = _roles(docs)
    pattern = f"{assets.STREAM_PREFIX}-*"
    assert assets.DEFAULT_STREAM.startswith(pattern.rstrip("*"))
    for role in roles.values():
        assert all(i["names"] == [pattern] for i in role["indices"])
        assert not {"all", "manage", "superuser"} & set(role.get("cluster", []))
    assert roles["tokenpulse_shipper"]["indices"][0]["privileges"] == ["create_doc"]
    assert "cluster" not in roles["tokenpulse_shipper"]
    assert set(roles["tokenpulse_reader"]["indices"][0]["privileges"]) == {
        "read",
        "view_index_metadata",
    }
    es = find(docs, "Elasticsearch", "tokenpulse")
    realm = {s["secretName"] for s in es["spec"]["auth"]["fileRealm"]}
    used = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for _, c in _containers(docs)
        for e in c.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert used <= realm  # every component signs in as a file-realm user
    readme = (K8S / "README.md").read_text()
    for secret in realm:
        assert secret in readme
    for role in roles:
        assert role in readme


def test_the_secrets_the_operator_creates_are_in_the_readme(rendered: dict[str, list[Doc]]) -> None:
    readme = (K8S / "README.md").read_text()
    for key in operator.receiver_secret_keys(deploy_links.kubernetes_config()):
        assert f"{key}" in readme
    assert operator.RECEIVER_SECRET in readme
    gateway = find(rendered["cpu"], "Deployment", "gateway")
    (keys,) = [v for v in pod_spec(gateway)["volumes"] if v["name"] == "keys"]
    assert keys["secret"]["secretName"] in readme
    assert keys["secret"]["items"][0]["key"] in readme
