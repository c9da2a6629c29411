"""Every runbook link of the Kubernetes deployment resolves in the cluster the manifests describe.

The link (deploy/k8s/links.env's runbook pattern) names the `runbooks` Ingress's host and path; the
Ingress sends that path to the `runbooks` Service, the Service to the Deployment's port, and the
Deployment serves the ConfigMap it mounts, which holds alerts/runbooks/. The pages are then
fetched from the real server the Deployment runs (the on-call receiver), given those files.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from monitoring import deploy_links
from monitoring.mixin import operator
from monitoring.mixin.config import DEFAULT as config
from monitoring.oncall.server import OncallSettings, serve
from stack.cli import build_parser
from tests.deploy.conftest import OVERLAYS, Doc, container, find, pod_spec
from tokenpulse import paths


def _links(docs: list[Doc]) -> list[str]:
    """Every runbook URL the rules and dashboards of a rendered overlay hold."""
    out = []
    for rule_doc in (d for d in docs if d["kind"] == "PrometheusRule"):
        for group in rule_doc["spec"]["groups"]:
            out += [r["annotations"]["runbook_url"] for r in group["rules"] if "alert" in r]
    dashboards = operator.DASHBOARD_LABEL.items()
    for cm in (d for d in docs if d["kind"] == "ConfigMap"):
        if not dashboards <= cm["metadata"]["labels"].items():
            continue
        for text in cm["data"].values():
            board = json.loads(text)
            panels = [board, *board["panels"]]
            out += [link.get("url", "") for p in panels for link in p.get("links", [])]
    return [u for u in out if "/runbooks" in u]


@pytest.fixture(scope="module")
def served(
    rendered: dict[str, list[Doc]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The runbooks Deployment's server, on the files of the ConfigMap it mounts."""
    docs = rendered["cpu"]
    deployment = find(docs, "Deployment", "runbooks")
    args = container(deployment, "runbooks")["args"]
    parsed = build_parser(args).parse_args(args)
    folder = tmp_path_factory.mktemp("runbooks")
    for name, text in find(docs, "ConfigMap", operator.RUNBOOKS_CONFIG_MAP)["data"].items():
        (folder / name).write_text(text)
    settings = OncallSettings(
        host="127.0.0.1", port=0, runbooks_dir=folder, file=folder / "notifications.jsonl"
    )
    assert Path(parsed.runbooks_dir) == Path("/runbooks")  # where the ConfigMap is mounted
    server = serve(settings, lambda _line: None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_link_is_the_ingress_path_to_the_runbooks_pod(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    ingress = find(docs, "Ingress", "runbooks")
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert rule["host"] in ingress["spec"]["tls"][0]["hosts"]  # so https
    base = f"https://{rule['host']}{path['path'].rstrip('/')}/"
    assert deploy_links.kubernetes_links().runbook_url_pattern == base + "{alertname}"
    assert path["pathType"] == "Prefix"
    backend = path["backend"]["service"]
    service = find(docs, "Service", backend["name"])
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == backend["port"]["name"]]
    deployment = find(docs, "Deployment", "runbooks")
    assert service["spec"]["selector"].items() <= pod_spec_labels(deployment).items()
    runbooks = container(deployment, "runbooks")
    (target,) = [p for p in runbooks["ports"] if p["name"] == port["targetPort"]]
    args = build_parser(runbooks["args"]).parse_args(runbooks["args"])
    assert int(args.port) == target["containerPort"]
    mounts = {m["name"]: m["mountPath"] for m in runbooks["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
    (mounted,) = [n for n, v in volumes.items() if "configMap" in v]
    assert volumes[mounted]["configMap"]["name"] == operator.RUNBOOKS_CONFIG_MAP
    assert mounts[mounted] == args.runbooks_dir


def test_the_config_map_holds_every_runbook(rendered: dict[str, list[Doc]]) -> None:
    data = find(rendered["cpu"], "ConfigMap", operator.RUNBOOKS_CONFIG_MAP)["data"]
    folder = paths.ALERTS / "runbooks"
    assert data == {p.name: p.read_text() for p in sorted(folder.glob("*.md"))}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rule_and_dashboard_links_the_clusters_runbooks(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    docs = rendered[overlay]
    links = _links(docs)
    base = deploy_links.kubernetes_links().runbook_url_pattern.removesuffix("{alertname}")
    assert len(links) > 60 and all(u.startswith(base) for u in links), sorted(set(links))[:5]
    local = config.links.runbook_url_pattern.removesuffix("{alertname}")
    assert local != base and local not in json.dumps(docs)  # no loopback link left anywhere


def test_every_link_serves_its_runbook(rendered: dict[str, list[Doc]], served: str) -> None:
    for url in sorted(set(_links(rendered["cpu"]))):
        path = urlsplit(url).path
        with urllib.request.urlopen(served + path, timeout=10) as resp:  # noqa: S310 (loopback)
            page = resp.read().decode()
        alert = path.removeprefix("/runbooks").strip("/")
        assert resp.status == 200 and (not alert or f"<h1>{alert}</h1>" in page), url


def pod_spec_labels(doc: Doc) -> dict[str, str]:
    """A workload's pod template labels."""
    return doc["spec"]["template"]["metadata"]["labels"]
