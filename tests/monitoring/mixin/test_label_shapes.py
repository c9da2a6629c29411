"""The same incident gives the same pages in every deployment's label shape.

A label shape is what each deployment's Prometheus attaches to the model servers' and the
exporters' series, derived here from the deployment itself, never written by hand: the local
stack's scrape targets (`up`'s component table, one replica and three), compose's prometheus.yml,
and for Kubernetes the rendered overlays (which pods exist, which exporter runs which collectors,
on which node) relabelled by the generated ServiceMonitors and PodMonitor. For each shape and
incident the test writes the incident's series in that shape, runs the real rules in promtool
(which alerts fire, with the labels inhibitions compare), then posts those alerts to the real
Alertmanager loaded with the generated config and keeps what it does not suppress: the pages.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import kustomize
from monitoring.mixin import operator, prometheus
from monitoring.mixin.config import DEFAULT as config
from stack import components
from tests.monitoring.mixin.test_inhibitions import _alertmanager, _suppressed
from tests.support.up import up_config, up_settings
from tokenpulse.paths import ROOT

ALERTS = ROOT / "alerts"
P = config.alert_prefix
Labels = dict[str, str]
_CAMEL = re.compile(r"_(\w)")

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None or shutil.which("prometheus-alertmanager") is None,
    reason="needs promtool and prometheus-alertmanager",
)


@dataclass
class Shape:
    """One deployment's targets: TF Serving's, the exporters reading it, the exporters reading
    GPUs, each with its target labels and the machine it runs on."""

    servers: list[tuple[Labels, str]] = field(default_factory=list)  # (labels, machine)
    # (labels, index of the server it watches, or None: it watches none that exists)
    watchers: list[tuple[Labels, int | None]] = field(default_factory=list)
    gpus: list[tuple[Labels, str]] = field(default_factory=list)  # (labels, machine)


# --- relabelling: Prometheus' semantics for the actions the deployments use ------------------


def relabel(labels: Labels, configs: list[dict[str, Any]]) -> Labels | None:
    """Prometheus relabelling (replace, keep, drop); None when the target is dropped."""
    out = dict(labels)
    for rc in configs:

        def get(key: str, default: Any = None, rc: dict[str, Any] = rc) -> Any:
            # prometheus.yml's snake_case or a monitor's camelCase
            return rc.get(key, rc.get(_CAMEL.sub(lambda g: g[1].upper(), key), default))

        action = get("action", "replace").lower()
        value = get("separator", ";").join(out.get(s, "") for s in get("source_labels", []))
        m = re.fullmatch(get("regex", "(.*)"), value)
        if action == "keep" and not m or action == "drop" and m:
            return None
        if action in ("keep", "drop"):
            continue
        if action != "replace":
            raise AssertionError(f"relabel action {action} not modelled here")
        if m is None:
            continue
        result = re.sub(
            r"\$\{?(\w+)\}?",
            lambda g, m=m: m.group(int(g[1]) if g[1].isdigit() else g[1]) or "",
            get("replacement", "$1"),
        )
        target = get("target_label")
        if result:
            out[target] = result
        else:
            out.pop(target, None)
    return {k: v for k, v in out.items() if not k.startswith("__")}


def _static(targets: prometheus.Targets) -> dict[str, list[Labels]]:
    """job -> the target labels of each static target of that job."""
    out: dict[str, list[Labels]] = {}
    for job in prometheus.scrape_configs(config, targets):
        for group in job.get("static_configs", []):  # file_sd jobs (training) list none
            for host in group["targets"]:
                meta = {"job": job["job_name"], "__address__": host, **group.get("labels", {})}
                labels = relabel(meta, job.get("relabel_configs", []))
                if labels is not None:
                    labels.setdefault("instance", host)
                    out.setdefault(job["job_name"], []).append(labels)
    return out


def _static_shape(targets: prometheus.Targets, gpus: bool) -> Shape:
    jobs = _static(targets)
    servers = [(labels, "host") for labels in jobs[config.jobs.modelserver]]
    (exporter,) = jobs[config.jobs.exporter]
    # the exporter watches the first model server (`up` and compose: replica 0)
    return Shape(servers, [(exporter, 0)], [(exporter, "host")] if gpus else [])


def local_shape(tmp: Path, replicas: int) -> Shape:
    s = up_settings(tmp, model_server_replicas=replicas)
    return _static_shape(components._targets(up_config(s)), gpus=True)


def compose_shape() -> Shape:
    # docker-compose.gpu.yml turns the exporter's NVML collector on
    return _static_shape(prometheus.COMPOSE_TARGETS, gpus=True)


# --- Kubernetes: the rendered overlay's pods, scraped by the generated monitors ---------------


def _pods(docs: list[dict], nodes: dict[str, list[str]]) -> Iterator[tuple[dict, str, str]]:
    """(workload, pod name, node) of each pod: a Deployment's replicas spread over its nodes, a
    DaemonSet's one per node of its kind."""
    for doc in docs:
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "tfserving":
            for i in range(doc["spec"]["replicas"]):
                yield doc, f"tfserving-5d8c9-{i}", nodes["tfserving"][i]
        elif doc["kind"] == "DaemonSet":
            for node in nodes["daemonset"]:
                yield doc, f"{doc['metadata']['name']}-{node[-1]}x7", node


def _meta(doc: dict, pod: str, node: str, port: str) -> Labels:
    labels = doc["spec"]["template"]["metadata"]["labels"]
    meta = {f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', k)}": v
            for k, v in labels.items()}  # fmt: skip
    # what the operator adds before the monitor's own relabelings
    meta |= {
        "__meta_kubernetes_pod_name": pod, "__meta_kubernetes_pod_node_name": node,
        "namespace": "tokenpulse", "pod": pod, "endpoint": port,
        "instance": f"10.0.{node[-1]}.{len(pod)}:{port}",
    }  # fmt: skip
    return meta


def _args(doc: dict, port: str) -> list[str] | None:
    spec = doc["spec"]["template"]["spec"]
    for c in [*spec.get("initContainers", []), *spec["containers"]]:  # native sidecars too
        if any(p.get("name") == port for p in c.get("ports", [])):
            return [str(a) for a in c.get("args", [])]
    return None


def k8s_shape(overlay: str) -> Shape:
    docs = kustomize.build(ROOT / "deploy" / "k8s" / "overlays" / overlay)
    monitors = {
        d["metadata"]["name"]: d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")
    }
    gpu = overlay == "gpu"
    nodes = {
        "tfserving": ["gpu-node-1", "gpu-node-2"] if gpu else ["cpu-node-1", "cpu-node-2"],
        "daemonset": ["gpu-node-1", "gpu-node-2", "gpu-node-3"],  # node 3 runs no TF Serving
    }
    shape = Shape()
    server_on: dict[str, int] = {}
    for job, component in (
        (config.jobs.modelserver, "modelserver"),
        (config.jobs.exporter, "exporter"),
    ):
        spec = monitors[job]["spec"]
        (endpoint,) = spec.get("endpoints") or spec["podMetricsEndpoints"]
        selector = spec["selector"]["matchLabels"]
        for doc, pod, node in _pods(docs, nodes):
            pod_labels = doc["spec"]["template"]["metadata"]["labels"]
            if component == "modelserver" and doc["kind"] != "Deployment":
                continue
            if component == "exporter" and not selector.items() <= pod_labels.items():
                continue
            args = _args(doc, operator.PORTS[component])
            if args is None:
                continue
            meta = _meta(doc, pod, node, operator.PORTS[component])
            labels = relabel(meta, endpoint["relabelings"])
            assert labels is not None
            if component == "modelserver":
                server_on[node] = len(shape.servers)
                shape.servers.append((labels, node))
                continue
            if "--no-collector.tfserving" not in args:
                url = next(a for a in args if a.startswith("--tfserving.url="))
                # the sidecar reads its own pod; the DaemonSet the node-local Service's pod
                mine = "127.0.0.1" in url
                watched = server_on.get(node) if not mine else server_on[node]
                shape.watchers.append((labels, watched))
            if "--collector.nvml" in args:
                shape.gpus.append((labels, node))
    return shape


SHAPES = ["local-1", "local-3", "compose", "k8s-cpu", "k8s-gpu"]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Shape]:
    tmp = tmp_path_factory.mktemp("shapes")
    return {
        "local-1": local_shape(tmp / "l1", 1),
        "local-3": local_shape(tmp / "l3", 3),
        "compose": compose_shape(),
        "k8s-cpu": k8s_shape("cpu"),
        "k8s-gpu": k8s_shape("gpu"),
    }


# --- incidents ------------------------------------------------------------------------------


def _sel(labels: Labels, **more: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted({**labels, **more}.items())) + "}"


def _series(shape: Shape, incident: str) -> list[dict[str, str]]:
    """The incident's input series in the shape: replica 0 (the first server) is the one hit."""
    out = []
    steps = 20
    for i, (labels, _machine) in enumerate(shape.servers):
        down = incident == "server-down" and i == 0
        out.append(
            {"series": f"up{_sel(labels)}", "values": f"1 0x{steps}" if down else f"1x{steps}"}
        )
        status = "RESOURCE_EXHAUSTED" if incident == "gpu-full" and i == 0 else "OK"
        metric = f":tensorflow:serving:request_count{_sel(labels, model_name='gen', status=status)}"
        out.append({"series": metric, "values": f"0+60x{steps}"})
    for labels, watched in shape.watchers:
        up = watched is not None and not (incident == "server-down" and watched == 0)
        available = "0" if incident == "no-version" and watched == 0 else "1"
        gen = _sel(labels, model="gen")
        out.append({"series": f"tokenpulse_tfserving_up{gen}", "values": f"{int(up)}x{steps}"})
        if up:
            values = f"{available}x{steps}"
            out.append(
                {"series": f"tokenpulse_tfserving_model_versions_available{gen}", "values": values}
            )
    hit = shape.servers[0][1]
    for labels, machine in shape.gpus:
        gpu = _sel(labels, gpu="0", uuid=f"GPU-{machine}")
        used = "99" if incident == "gpu-full" and machine == hit else "50"
        out.append(
            {"series": f"tokenpulse_gpu_memory_used_bytes{gpu}", "values": f"{used}x{steps}"}
        )
        out.append({"series": f"tokenpulse_gpu_memory_total_bytes{gpu}", "values": f"100x{steps}"})
    return out


# incident -> (minute evaluated, the pages: (alertname, severity) notified after inhibition)
INCIDENTS = {
    "healthy": (15, set()),
    "server-down": (5, {(f"{P}TfServingDown", "critical")}),
    "no-version": (5, {(f"{P}TfServingNoAvailableVersion", "critical")}),
    # TF Serving out of GPU memory: the GPU alert explains its RESOURCE_EXHAUSTED ticket
    "gpu-full": (15, {(f"{P}GpuMemoryNearlyFull", "warning")}),
}
KEPT = ("alertname", "severity", "model", config.replica_label, config.node_label)


def _firing(shape: Shape, incident: str, tmp: Path) -> list[Labels]:
    """The alerts the rules fire, by promtool: their labels that routing and inhibition read."""
    minute, _ = INCIDENTS[incident]
    query = f'count by ({", ".join(KEPT)}) (ALERTS{{alertstate="firing",alertname=~"{P}.+"}})'
    groups = [g["name"] for f in ("recording", "alerts") for g in
              yaml.safe_load((ALERTS / f"{f}.rules.yml").read_text())["groups"]]  # fmt: skip
    out = tmp / "probe.out"
    # promtool compares with what we expect; an empty expectation prints what it got
    doc = {
        "rule_files": [str(ALERTS / "recording.rules.yml"), str(ALERTS / "alerts.rules.yml")],
        "evaluation_interval": "1m",
        "group_eval_order": groups,
        "tests": [{
            "interval": "1m", "input_series": _series(shape, incident),
            "promql_expr_test": [{"expr": query, "eval_time": f"{minute}m", "exp_samples": []}],
        }],
    }  # fmt: skip
    path = tmp / f"{incident}.test.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    out.write_text(run.stdout + run.stderr)
    if run.returncode == 0:
        return []
    got = (run.stdout + run.stderr).partition("got:")[2]
    assert got, run.stdout + run.stderr
    return [dict(re.findall(r'(\w+)="([^"]*)"', s)) for s in re.findall(r"\{[^}]*\}", got)]


@pytest.fixture(scope="module")
def am_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _alertmanager(tmp_path_factory.mktemp("am")) as url:
        yield url


@pytest.mark.parametrize("incident", list(INCIDENTS))
@pytest.mark.parametrize("shape_name", SHAPES)
def test_the_same_incident_pages_the_same_in_every_label_shape(
    shapes: dict[str, Shape], shape_name: str, incident: str, am_url: str, tmp_path: Path
) -> None:
    shape = shapes[shape_name]
    if incident == "gpu-full" and not shape.gpus:
        pytest.skip("no GPU in this deployment")
    firing = _firing(shape, incident, tmp_path)
    _, want = INCIDENTS[incident]
    notifying = [a for a in firing if a["severity"] != "info"]
    names = {a["alertname"] for a in notifying}
    suppressed = (
        _suppressed(am_url, *firing, want=names - {n for n, _ in want}) if firing else set()
    )
    pages = {(a["alertname"], a["severity"]) for a in notifying if a["alertname"] not in suppressed}
    assert pages == want, (shape_name, firing)
