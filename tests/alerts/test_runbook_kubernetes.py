"""The Kubernetes variant of every runbook names only what the rendered overlays hold.

Each overlay is rendered as `kubectl kustomize` prints it (devtools/kustomize.py). Every kind and
name, namespace, container, label selector and port a `kubectl` line names exists there, or is
an object the operators create for a rendered resource: ECK's HTTP Services and pods of the
Elasticsearch and Kibana, the basic-auth Secrets the rendered objects refer to, the Prometheus
Operator's governing Services and pods that the rendered ServiceMonitors select. Each local port a
line uses was port-forwarded earlier in its block; `tokenpulse rollout` says `--deployment
kubernetes` and `tokenpulse samples` names an Elasticsearch URL. A line whose comment says `cpu
overlay` or `gpu overlay` is held to that overlay only, every other line to both.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_settings import BaseSettings

from devtools import kustomize
from tests.deploy.test_references import SETTINGS_MODULES
from tests.support.runbooks import (
    HOST_URL,
    RUNBOOKS,
    Block,
    Command,
    blocks,
    fill,
    program,
    simple_commands,
    tokenpulse_problems,
)
from tokenpulse.paths import ROOT

K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")
Doc = dict[str, Any]

KINDS = {
    "deploy": "Deployment", "deployment": "Deployment", "deployments": "Deployment",
    "sts": "StatefulSet", "statefulset": "StatefulSet", "ds": "DaemonSet",
    "daemonset": "DaemonSet", "svc": "Service", "service": "Service", "job": "Job",
    "cm": "ConfigMap", "configmap": "ConfigMap", "secret": "Secret", "pod": "Pod",
    "pods": "Pod", "po": "Pod", "ingress": "Ingress", "pvc": "PersistentVolumeClaim",
    "hpa": "HorizontalPodAutoscaler", "events": "Event", "prometheusrule": "PrometheusRule",
    "elasticsearch": "Elasticsearch",
}  # fmt: skip
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
# ECK's HTTP Service (name suffix, port) and its pods' label and container, per resource kind
ECK = {
    "Elasticsearch": (
        "es-http",
        9200,
        "elasticsearch.k8s.elastic.co/cluster-name",
        "elasticsearch",
    ),
    "Kibana": ("kb-http", 5601, "kibana.k8s.elastic.co/name", "kibana"),
}
ANY = "*"  # a label value the operator sets from a name the overlays do not hold
# the Prometheus Operator's governing Service of each Prometheus / Alertmanager, and the labels
# it puts on that Service and on the pods (the rendered ServiceMonitors select them by these)
OPERATOR = {
    "prometheus-operated": ({"operated-prometheus": "true"}, "prometheus", 9090),
    "alertmanager-operated": ({"operated-alertmanager": "true"}, "alertmanager", 9093),
}
# kubectl verbs a runbook may use, and the flags among them that take a value
NODE_VERBS = {"cordon", "uncordon", "drain"}  # a node: cluster-scoped, no namespace
VERBS = {"get", "describe", "logs", "exec", "port-forward", "rollout", "set", "apply", "top",
         "scale", "delete", "wait", "patch", *NODE_VERBS}  # fmt: skip
VALUE_FLAGS = {"-n", "--namespace", "-c", "--container", "-l", "--selector", "-o", "--output",
               "--tail", "--since", "-k", "--kustomize", "--replicas", "--for", "--timeout",
               "--field-selector", "--sort-by", "-p", "--patch"}  # fmt: skip


@dataclass
class Cluster:
    """What one rendered overlay holds, and what the operators create for it."""

    objects: dict[tuple[str, str, str], Doc] = field(default_factory=dict)  # (ns, kind, name)
    # (namespace, kind, name) -> {port name or number as text}
    ports: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    containers: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)
    pod_labels: list[tuple[str, dict[str, str], set[str]]] = field(default_factory=list)

    def has(self, ns: str, kind: str, name: str) -> bool:
        if (ns, kind, name) in self.objects or (ns, kind, name) in self.ports:
            return True
        # a generated ConfigMap's name carries a content hash
        return kind == "ConfigMap" and any(
            k[:2] == (ns, kind) and k[2].rsplit("-", 1)[0] == name for k in self.objects
        )


def _add_workload(cluster: Cluster, ns: str, doc: Doc) -> None:
    key = (ns, doc["kind"], doc["metadata"]["name"])
    spec = doc["spec"]["template"]["spec"]
    every = [*spec.get("initContainers", []), *spec["containers"]]  # native sidecars too
    names = {c["name"] for c in every}
    cluster.containers[key] = names
    cluster.ports[key] = {
        str(v) for c in every for p in c.get("ports", [])
        for v in (p["containerPort"], p.get("name")) if v
    }  # fmt: skip
    labels = doc["spec"]["template"]["metadata"].get("labels", {})
    cluster.pod_labels.append((ns, labels, names))


def _cluster(docs: list[Doc]) -> Cluster:
    cluster = Cluster()
    for doc in docs:
        ns = doc["metadata"].get("namespace", "")
        key = (ns, doc["kind"], doc["metadata"]["name"])
        cluster.objects[key] = doc
        if doc["kind"] in WORKLOADS:
            _add_workload(cluster, ns, doc)
        if doc["kind"] == "Service":
            cluster.ports[key] = {
                str(v) for p in doc["spec"]["ports"] for v in (p["port"], p.get("name")) if v
            }
        if doc["kind"] in ECK:  # ECK's HTTP Service and pods of each
            suffix, port, label, app = ECK[doc["kind"]]
            name = doc["metadata"]["name"]
            cluster.ports[(ns, "Service", f"{name}-{suffix}")] = {str(port)}
            cluster.pod_labels.append((ns, {label: name}, {app}))
        for secret in _secrets(doc):  # the Secrets the operator creates (deploy/k8s/README.md)
            cluster.ports.setdefault((ns, "Secret", secret), set())
        if doc["kind"] == "ServiceMonitor":
            _add_operated(cluster, doc)
    return cluster


def _secrets(node: Any) -> set[str]:
    """The Secrets an object refers to (`secretName`, secret key selectors)."""
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("secretName"), str):
            found.add(node["secretName"])
        for key, value in node.items():
            if key.lower().endswith("secret") or key == "secretKeyRef":
                if isinstance(value, dict) and isinstance(value.get("name"), str):
                    found.add(value["name"])
            found |= _secrets(value)
    elif isinstance(node, list):
        for item in node:
            found |= _secrets(item)
    return found


def _add_operated(cluster: Cluster, monitor: Doc) -> None:
    """The Prometheus Operator's Service (and its pods) that a rendered ServiceMonitor selects."""
    selector = monitor["spec"]["selector"].get("matchLabels", {})
    ports = {e.get("port") for e in monitor["spec"]["endpoints"]}
    for name, (labels, app, port) in OPERATOR.items():
        if selector != labels or "web" not in ports:
            continue
        for ns in monitor["spec"].get("namespaceSelector", {}).get("matchNames", []):
            cluster.ports[(ns, "Service", name)] = {"web", str(port)}
            labels = {"app.kubernetes.io/name": app, app: ANY}
            cluster.pod_labels.append((ns, labels, {app, "config-reloader"}))


@pytest.fixture(scope="module")
def clusters() -> dict[str, Cluster]:
    return {name: _cluster(kustomize.build(K8S / "overlays" / name)) for name in OVERLAYS}


def _settings_variables() -> set[str]:
    known: set[str] = set()
    for module_name in SETTINGS_MODULES:
        for obj in vars(importlib.import_module(module_name)).values():
            if isinstance(obj, type) and issubclass(obj, BaseSettings) and obj is not BaseSettings:
                prefix = obj.model_config.get("env_prefix", "")
                known |= {f"{prefix}{name}".upper() for name in obj.model_fields}
    return known


@dataclass
class Kubectl:
    """One kubectl command, taken apart."""

    namespace: str
    verb: list[str]  # `get`, `rollout restart`, `set env`, ...
    flags: dict[str, str]
    args: list[str]
    inside: list[str]  # after `--`


def _kubectl(words: list[str]) -> Kubectl:
    flags: dict[str, str] = {}
    args: list[str] = []
    inside: list[str] = []
    rest = words[1:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "--":
            inside = rest[i + 1 :]
            break
        if word.startswith("-"):
            name, eq, value = word.partition("=")
            if not eq and name in VALUE_FLAGS:
                value = rest[i + 1]
                i += 1
            flags[name] = value
        else:
            args.append(word)
        i += 1
    namespace = flags.get("-n", flags.get("--namespace", ""))
    verb = args[:2] if args[:1] in (["rollout"], ["set"]) else args[:1]
    return Kubectl(namespace, verb, flags, args[len(verb) :], inside)


def _resources(k: Kubectl) -> list[tuple[str, str]]:
    """(kind, name) of the objects a command names: KIND/NAME words, or `get KIND NAME`."""
    out = []
    words = k.args
    if k.verb in (["get"], ["describe"]) and words and "/" not in words[0]:
        kind = KINDS.get(words[0].lower(), words[0])
        return [(kind, name) for name in words[1:]] or [(kind, "")]
    for word in words:
        if "/" in word and not word.startswith(("deploy/k8s", "/", ".")):
            kind, _, name = word.partition("/")
            out.append((KINDS.get(kind.lower(), kind), name))
    return out


def _kubectl_problems(k: Kubectl, cluster: Cluster, variables: set[str]) -> list[str]:
    bad = []
    if k.verb[:1] and k.verb[0] not in VERBS:
        return [f"no kubectl verb {k.verb[0]} here"]
    if k.verb == ["apply"]:
        path = ROOT / k.flags.get("-k", k.flags.get("--kustomize", ""))
        return [] if path.parent == K8S / "overlays" and path.is_dir() else [f"no overlay {path}"]
    if k.verb[0] in NODE_VERBS:
        return [] if len(k.args) == 1 else ["one node"]
    if not k.namespace:
        return ["no -n <namespace>"]
    ns = k.namespace
    for kind, name in _resources(k):
        if kind in ("Pod", "Event") and not name:
            continue
        if not name:
            if not any(key[:2] == (ns, kind) for key in [*cluster.objects, *cluster.ports]):
                bad.append(f"no {kind} in namespace {ns}")
            continue
        if not cluster.has(ns, kind, name):
            bad.append(f"no {kind} {name} in namespace {ns}")
            continue
        container = k.flags.get("-c", k.flags.get("--container"))
        if container and container not in cluster.containers.get((ns, kind, name), set()):
            bad.append(f"no container {container} in {kind} {name}")
        if k.verb == ["port-forward"]:
            for spec in k.args[1:]:
                remote = spec.split(":")[-1]
                if remote not in cluster.ports.get((ns, kind, name), set()):
                    bad.append(f"{kind} {name} has no port {remote}")
    selector = k.flags.get("-l", k.flags.get("--selector"))
    if selector:
        pods = [(labels, names) for n, labels, names in cluster.pod_labels
                if n == ns and _selects(selector, labels)]  # fmt: skip
        if not pods:
            bad.append(f"no pods labelled {selector} in namespace {ns}")
        container = k.flags.get("-c", k.flags.get("--container"))
        if container and pods and not any(container in names for _, names in pods):
            bad.append(f"no container {container} in the pods labelled {selector}")
    if k.verb == ["set", "env"]:
        for word in k.args:
            name = word.split("=", 1)[0]
            if "=" in word and name.startswith("TOKENPULSE_") and name not in variables:
                bad.append(f"{name} is no component setting")
    return bad + _inside_problems(k, cluster)


def _inside_problems(k: Kubectl, cluster: Cluster) -> list[str]:
    """What `kubectl exec ... -- CMD` runs: a tokenpulse command parses, and each URL names a
    Service of the namespace and one of its ports (the cluster's DNS names)."""
    if not k.inside:
        return []
    bad = tokenpulse_problems(k.inside, "kubernetes") if k.inside[0] == "tokenpulse" else []
    for host, port in re.findall(r"https?://([a-z][a-z0-9-]*):(\d+)", " ".join(k.inside)):
        if port not in cluster.ports.get((k.namespace, "Service", host), set()):
            bad.append(f"no Service {host} with port {port} in namespace {k.namespace}")
    return bad


def _selects(selector: str, labels: dict[str, str]) -> bool:
    """Whether `-l` (`k=v` pairs and bare keys, comma-separated) selects pods with these labels;
    ANY stands for a value the operator chooses (the resource's name)."""
    for term in selector.split(","):
        key, eq, value = term.partition("=")
        if key not in labels or (eq and labels[key] not in (value, ANY)):
            return False
    return True


def _forwarded(words: list[str]) -> set[str]:
    """The local ports a `kubectl port-forward` opens."""
    k = _kubectl(words)
    return {spec.split(":")[0] for spec in k.args[1:]} if k.verb == ["port-forward"] else set()


def _kubernetes_problems(
    block: Block, clusters: dict[str, Cluster], variables: set[str]
) -> list[str]:
    bad = []
    forwarded: set[str] = set()
    for line in block.lines:
        command = Command(block.runbook, line, block.deployment, block.section)
        for words in simple_commands(fill(line)):
            runs = program(words)
            if runs == "kubectl":
                k = _kubectl(words[words.index("kubectl") :])
                for overlay in command.overlays:
                    found = _kubectl_problems(k, clusters[overlay], variables)
                    bad += [f"{overlay}: {p}: {line}" for p in found]
                forwarded |= _forwarded(words)
                continue
            if runs == "tokenpulse":
                tokenpulse = words[words.index("tokenpulse") :]
                bad += [f"{p}: {line}" for p in tokenpulse_problems(tokenpulse, "kubernetes")]
            for port in HOST_URL.findall(" ".join(words)):
                if port not in forwarded:
                    bad.append(f"port {port} is not port-forwarded earlier in the block: {line}")
    return bad


def test_kubernetes_lines_name_what_the_rendered_overlays_hold(
    clusters: dict[str, Cluster],
) -> None:
    variables = _settings_variables()
    bad = []
    for path in sorted(RUNBOOKS.glob("*.md")):
        for block in (b for b in blocks(path) if b.deployment == "kubernetes"):
            bad += [f"{path.stem}: {p}" for p in _kubernetes_problems(block, clusters, variables)]
    assert not bad, "\n".join(bad)


FORWARD = "kubectl -n tokenpulse port-forward svc/gateway 8080:8080 &"
WRONG_KUBERNETES = [
    (["kubectl -n tokenpulse logs deploy/gatway"], "no Deployment gatway in namespace tokenpulse"),
    (["kubectl logs deploy/gateway"], "no -n <namespace>"),
    (
        ["kubectl -n monitoring logs deploy/gateway"],
        "no Deployment gateway in namespace monitoring",
    ),
    (["kubectl -n tokenpulse logs deploy/gateway -c exporter"], "no container exporter"),
    (["kubectl -n tokenpulse port-forward svc/gateway 8080:9090 &"], "has no port 9090"),
    (["curl -s http://127.0.0.1:8080/readyz"], "port 8080 is not port-forwarded"),
    ([FORWARD, "curl -s http://127.0.0.1:9093/-/ready"], "port 9093 is not port-forwarded"),
    (["kubectl -n tokenpulse logs ds/exporter -c exporter"], "cpu: no DaemonSet exporter"),
    (["kubectl -n tokenpulse logs ds/exporter   # cpu overlay"], "cpu: no DaemonSet exporter"),
    (["kubectl -n tokenpulse get pods -l app.kubernetes.io/name=tfservng"], "no pods labelled"),
    (["kubectl -n monitoring port-forward svc/prometheus 9090:9090 &"], "no Service prometheus"),
    (["kubectl -n tokenpulse get secret tokenpulse-es-graphana"], "no Secret"),
    (["kubectl -n tokenpulse rollout restart deployment/shipper"], "no Deployment shipper"),
    (["kubectl -n tokenpulse kustomize ."], "no kubectl verb kustomize"),
    (["kubectl apply --server-side -k deploy/k8s/overlays/tpu"], "no overlay"),
    (
        ["kubectl -n tokenpulse set env deploy/gateway -c gateway TOKENPULSE_GATEWAY_WEIGHT=0"],
        "TOKENPULSE_GATEWAY_WEIGHT is no component setting",
    ),
    ([FORWARD, "tokenpulse rollout status"], "lacks --deployment kubernetes"),
    (['export X="$(kubectl -n tokenpulse get secret nope -o name)"'], "no Secret nope"),
    (
        ["kubectl -n tokenpulse exec sts/shipper -c shipper -- tokenpulse samples search"],
        "lacks --es-url",
    ),
    (
        ["kubectl -n tokenpulse exec sts/shipper -- curl -s http://elasticsearch:9200/"],
        "no Service elasticsearch with port 9200",
    ),
]


def _kubernetes(lines: list[str], clusters: dict[str, Cluster]) -> list[str]:
    block = Block("X", "sh kubernetes", "Mitigation", "", tuple(lines))
    return _kubernetes_problems(block, clusters, _settings_variables())


@pytest.mark.parametrize(
    ("lines", "problem"), WRONG_KUBERNETES, ids=[w[1] for w in WRONG_KUBERNETES]
)
def test_a_wrong_kubernetes_line_is_named(
    clusters: dict[str, Cluster], lines: list[str], problem: str
) -> None:
    found = _kubernetes(lines, clusters)
    assert any(problem in p for p in found), found


RIGHT_KUBERNETES = [
    [
        FORWARD,
        "curl -s http://127.0.0.1:8080/readyz",
        "tokenpulse rollout status --deployment kubernetes",
    ],
    ["kubectl -n tokenpulse logs ds/exporter -c exporter --tail=10   # gpu overlay"],
    ["kubectl -n tokenpulse port-forward deploy/tfserving 9410:9410 &   # cpu overlay"],
    ["kubectl -n monitoring port-forward svc/alertmanager-operated 9093:9093 &"],
    ["kubectl -n monitoring logs -l app.kubernetes.io/name=prometheus -c prometheus --tail=10"],
    ["kubectl -n monitoring get pods -l alertmanager -o wide"],
    ["kubectl -n tokenpulse port-forward svc/tokenpulse-es-http 9200:9200 &"],
    ["kubectl -n tokenpulse get pods -l elasticsearch.k8s.elastic.co/cluster-name=tokenpulse"],
    ["kubectl -n tokenpulse exec deploy/tfserving -c tfserving -- cat /config/monitoring.config"],
    ["kubectl apply --server-side -k deploy/k8s/overlays/gpu"],
]


@pytest.mark.parametrize("lines", RIGHT_KUBERNETES, ids=[w[-1][:40] for w in RIGHT_KUBERNETES])
def test_a_right_kubernetes_line_passes(clusters: dict[str, Cluster], lines: list[str]) -> None:
    assert _kubernetes(lines, clusters) == []
