"""The Kubernetes pages link the hosts of deploy/k8s/links.env, never loopback: each alert's
runbook and dashboard panel (the PrometheusRules), each notification's sample search (the
AlertmanagerConfig), and the dashboards' links, in both rendered overlays."""

from __future__ import annotations

import json
import re

import pytest

from monitoring import deploy_links
from monitoring.mixin.links import loopback
from tests.deploy.conftest import OVERLAYS, Doc

_URL = re.compile(r"https?://[^\s'\"\\)]+")


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rules_link_the_configured_runbooks_and_grafana(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    links = deploy_links.kubernetes_links()
    alerts = [
        rule
        for doc in rendered[overlay]
        if doc["kind"] == "PrometheusRule"
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]
    assert alerts
    for rule in alerts:
        notes = rule["annotations"]
        assert notes["runbook_url"] == links.runbook_url(rule["alert"])
        assert notes["dashboard_url"].startswith(f"{links.grafana_url}/d/tokenpulse-")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_notifications_link_the_configured_kibana(
    rendered: dict[str, list[Doc]], overlay: str
) -> None:
    links = deploy_links.kubernetes_links()
    (am,) = [d for d in rendered[overlay] if d["kind"] == "AlertmanagerConfig"]
    urls = [u for s in _strings(am["spec"]["receivers"]) for u in _URL.findall(s)]
    samples = [u for u in urls if "/app/discover" in u]
    assert samples and all(u.startswith(f"{links.kibana_url}/app/discover#/") for u in samples)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_page_or_dashboard_links_loopback(rendered: dict[str, list[Doc]], overlay: str) -> None:
    texts = []
    for doc in rendered[overlay]:
        if doc["kind"] in ("PrometheusRule", "AlertmanagerConfig"):
            texts += _strings(doc["spec"])
        elif doc["kind"] == "ConfigMap" and doc["metadata"].get("labels", {}).get(
            "grafana_dashboard"
        ):
            texts += _strings([json.loads(t) for t in doc["data"].values()])
    found = [u for t in texts for u in _URL.findall(t) if loopback(u)]
    assert texts and found == []
