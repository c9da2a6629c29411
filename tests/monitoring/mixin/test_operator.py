"""The Prometheus Operator resources say what the local and compose files say, nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitoring import deploy_links
from monitoring.mixin import alertmanager, operator, prometheus, rulefiles
from monitoring.mixin.alerts import training
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.config import MixinConfig
from monitoring.mixin.dashboards import build_models, render_all
from tokenpulse import paths

# the cluster's config: the shipped one with deploy/k8s/links.env's links
CLUSTER = deploy_links.kubernetes_config()


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _matcher_text(m: dict[str, str]) -> str:
    return f"{m['name']}{m['matchType']}{json.dumps(m['value'])}"


def test_prometheus_rules_hold_exactly_the_rule_files_groups() -> None:
    rules = operator.prometheus_rules(CLUSTER)
    assert {r["metadata"]["name"] for r in rules} == {"tokenpulse-alerts", "tokenpulse-recording"}
    rendered = rulefiles.render_files(CLUSTER, build_models(CLUSTER))
    for name, text in rulefiles.render_files(config, build_models(config)).items():
        kind = name.removesuffix(".rules.yml")
        (rule,) = [r for r in rules if r["metadata"]["name"] == f"tokenpulse-{kind}"]
        # the same groups, but each runbook and dashboard link is the cluster's (links.env)
        links = deploy_links.kubernetes_links()
        groups = yaml.safe_load(text)["groups"]
        for group in groups:
            for r in group["rules"]:
                notes = r.get("annotations", {})
                if "runbook_url" in notes:
                    notes["runbook_url"] = links.runbook_url(r["alert"])
                if "dashboard_url" in notes:
                    url = notes["dashboard_url"].removeprefix(config.links.grafana_url)
                    notes["dashboard_url"] = links.grafana_url + url
        # which is the rule file rendered with the cluster's config
        assert yaml.safe_load(rendered[name])["groups"] == groups
        # every alert names TokenPulse's namespace itself: no enforcedNamespaceLabel needed
        for r in (r for group in groups for r in group["rules"] if "alert" in r):
            r["labels"] = {**r.get("labels", {}), "namespace": "tokenpulse"}
        assert rule["spec"]["groups"] == groups


def test_one_monitor_per_compose_job_with_its_path_interval_and_job_name() -> None:
    jobs = {j["job_name"]: j for j in prometheus.scrape_configs(config, prometheus.COMPOSE_TARGETS)}
    monitors = {m["metadata"]["name"]: m for m in operator.monitors(CLUSTER)}
    # training's compose job reads the runs' own file_sd files: its PodMonitor is built apart
    assert set(monitors) == set(jobs) - {config.jobs.training}
    del jobs[config.jobs.training]
    for name, job in jobs.items():
        spec = monitors[name]["spec"]
        (endpoint,) = spec.get("endpoints") or spec["podMetricsEndpoints"]
        assert endpoint["path"] == job.get("metrics_path", "/metrics")
        assert endpoint["interval"] == endpoint["scrapeTimeout"] == config.scrape_interval
        assert endpoint["relabelings"][0] == {
            "action": "replace",
            "targetLabel": "job",
            "replacement": name,
        }
    assert monitors[config.jobs.exporter]["kind"] == "PodMonitor"
    assert monitors[config.jobs.gateway]["kind"] == "ServiceMonitor"
    assert monitors[config.jobs.gateway]["spec"]["selector"]["matchLabels"] == {
        operator.MONITOR_LABEL: config.jobs.gateway
    }


def test_static_labels_and_relabel_configs_carry_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A relabelling added to prometheus.yml reaches the monitors without touching this module."""
    original = prometheus.scrape_configs

    def with_relabelling(cfg: MixinConfig, targets: prometheus.Targets) -> list[dict[str, object]]:
        jobs = original(cfg, targets)
        for job in jobs:
            if "static_configs" not in job:  # training's file_sd job: no monitor translates it
                continue
            job["static_configs"][0]["labels"] = {"cluster": "local"}  # type: ignore[index]
            job["relabel_configs"] = [
                {"source_labels": ["__address__"], "target_label": "instance", "regex": "(.*)"}
            ]
            job["metric_relabel_configs"] = [{"action": "drop", "regex": "go_.*"}]
        return jobs

    monkeypatch.setattr(prometheus, "scrape_configs", with_relabelling)
    for monitor in operator.monitors(CLUSTER)[:-1]:  # the last, training's, has no compose job
        spec = monitor["spec"]
        (endpoint,) = spec.get("endpoints") or spec["podMetricsEndpoints"]
        scoped = (config.replica_label, config.node_label)
        carried = [r for r in endpoint["relabelings"][1:] if r.get("targetLabel") not in scoped]
        assert carried == [
            {"action": "replace", "targetLabel": "cluster", "replacement": "local"},
            {"sourceLabels": ["__address__"], "targetLabel": "instance", "regex": "(.*)"},
        ]
        assert endpoint["metricRelabelings"] == [{"action": "drop", "regex": "go_.*"}]


def test_alertmanager_config_has_the_same_routes_inhibitions_and_receivers() -> None:
    am = yaml.safe_load(alertmanager.render(config))
    spec = operator.alertmanager_config(CLUSTER)["spec"]
    route = spec["route"]
    assert route["receiver"] == am["route"]["receiver"]
    assert route["groupBy"] == am["route"]["group_by"]
    assert route["groupWait"] == am["route"]["group_wait"]
    assert route["repeatInterval"] == am["route"]["repeat_interval"]
    for mine, theirs in zip(route["routes"], am["route"]["routes"], strict=True):
        assert mine["receiver"] == theirs["receiver"]
        assert [_matcher_text(m) for m in mine["matchers"]] == theirs["matchers"]
    for mine, theirs in zip(spec["inhibitRules"], am["inhibit_rules"], strict=True):
        assert [_matcher_text(m) for m in mine["sourceMatch"]] == theirs["source_matchers"]
        assert [_matcher_text(m) for m in mine["targetMatch"]] == theirs["target_matchers"]
        assert mine.get("equal", []) == theirs.get("equal", [])
    assert [r["name"] for r in spec["receivers"]] == [r["name"] for r in am["receivers"]]
    # a page carries its links in Kubernetes too (issue 17 B): the same text as the details
    (pager,) = [r for r in spec["receivers"] if r["name"] == "pager"]
    (pd,) = pager["pagerdutyConfigs"]
    assert pd["description"] == alertmanager.TITLE
    # ... linking the cluster's Kibana (deploy/k8s/links.env)
    text = alertmanager.alert_text(CLUSTER)
    assert f"{deploy_links.kubernetes_links().kibana_url}/app/discover" in text
    assert pd["details"] == [{"key": "alerts", "value": text}]


def test_receiver_secrets_are_keys_named_after_the_secret_files() -> None:
    files = set()
    for receiver in yaml.safe_load(alertmanager.render(config))["receivers"]:
        for configs in receiver.values():
            for cfg in configs if isinstance(configs, list) else []:
                files |= {Path(v).name for k, v in cfg.items() if k.endswith("_file")}
    keys = set(operator.receiver_secret_keys(CLUSTER))
    assert files and files <= keys
    # the webhooks' addresses: the ticket bridge, the dead man's switch, the meta channel
    assert keys - files == {"ticket-webhook-url", "watchdog-webhook-url", "meta-webhook-url"}


@pytest.mark.parametrize(
    "text, wanted",
    [
        ('severity="critical"', ("severity", "=", "critical")),
        ('slo=~".+"', ("slo", "=~", ".+")),
        ('alertname!~"A|B"', ("alertname", "!~", "A|B")),
        ('x!="a \\"b\\""', ("x", "!=", 'a "b"')),
    ],
)
def test_matcher_parses_each_operator(text: str, wanted: tuple[str, str, str]) -> None:
    m = operator.matcher(text)
    assert (m["name"], m["matchType"], m["value"]) == wanted
    assert _matcher_text(m) == text


def test_matcher_refuses_what_is_not_one() -> None:
    with pytest.raises(ValueError, match="not a matcher"):
        operator.matcher("severity critical")


def test_dashboards_become_sidecar_config_maps_with_the_same_json() -> None:
    maps = operator.dashboard_config_maps(CLUSTER)
    assert {name for m in maps for name in m["data"]} == set(render_all(config))
    cluster = render_all(CLUSTER)
    for m in maps:
        assert m["metadata"]["labels"] == {"grafana_dashboard": "1"}
        ((name, text),) = m["data"].items()
        # the dashboard rendered with the cluster's config: its runbook links are the cluster's
        committed = (paths.DASHBOARDS / name).read_text()
        assert text == cluster[name]
        assert config.links.runbook_url_pattern.split("{")[0] in committed
        assert config.links.runbook_url_pattern.split("{")[0] not in text


def test_adapter_rules_serve_the_gateway_load_per_pod() -> None:
    rules = operator.adapter_rules(CLUSTER)
    assert [r["name"]["as"] for r in rules] == list(operator.AUTOSCALING_METRICS)
    for rule, metric in zip(rules, operator.AUTOSCALING_METRICS, strict=True):
        assert rule["seriesQuery"].startswith(metric + "{" + config.jobs.selector("gateway"))
        assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}
    values = yaml.safe_load(operator.adapter_values(CLUSTER))
    assert values["rules"]["custom"] == rules and values["rules"]["default"] is False


def test_files_are_the_monitoring_kustomization_and_the_adapter_values() -> None:
    files = operator.files(CLUSTER)
    kustomization = yaml.safe_load(files[operator.MONITORING / "kustomization.yaml"])
    assert {operator.MONITORING / r for r in kustomization["resources"]} | {
        operator.MONITORING / "kustomization.yaml",
        operator.ADAPTER / "values.yaml",
        operator.KUBE_PROMETHEUS_STACK / "values.yaml",
        operator.TRAINING_COMPONENT / "kustomization.yaml",
        operator.TRAINING_COMPONENT / "podmonitor.yaml",
    } == set(files)
    component = yaml.safe_load(files[operator.TRAINING_COMPONENT / "kustomization.yaml"])
    assert component["kind"] == "Component" and component["resources"] == ["podmonitor.yaml"]
    (monitor,) = yaml.safe_load_all(files[operator.TRAINING_COMPONENT / "podmonitor.yaml"])
    assert monitor == operator.training_monitor(CLUSTER)
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert endpoint["relabelings"][0]["replacement"] == config.jobs.training
    for path, text in files.items():
        assert text.startswith(operator.HEADER), path
        assert all(doc for doc in yaml.safe_load_all(text)), path


def test_a_model_server_pod_and_its_sidecar_exporter_are_one_replica() -> None:
    by_name = {m["metadata"]["name"]: m for m in operator.monitors(CLUSTER)}
    scoped = {}
    for name, monitor in by_name.items():
        endpoints = monitor["spec"].get("endpoints") or monitor["spec"]["podMetricsEndpoints"]
        scoped[name] = [
            r["sourceLabels"]
            for r in endpoints[0]["relabelings"]
            if r.get("targetLabel") == config.replica_label
        ]
    # a TF Serving pod's name only: the GPU DaemonSet's exporter pods are no replica
    tfserving_pod = [[operator.REPLICA_POD_LABEL, "__meta_kubernetes_pod_name"]]
    assert scoped[config.jobs.modelserver] == tfserving_pod
    assert scoped[config.jobs.exporter] == tfserving_pod
    assert scoped[config.jobs.gateway] == []  # fleet jobs keep no replica label


def test_training_pods_are_selected_by_name_on_their_metrics_port() -> None:
    monitor = operator.training_monitor(CLUSTER)
    assert monitor["kind"] == "PodMonitor"
    assert monitor["metadata"]["name"] == config.jobs.training == "tokenpulse-training"
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"] == {"app.kubernetes.io/name": "tokenpulse-training"}
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["relabelings"][0]["replacement"] == "tokenpulse-training"


def test_each_training_series_names_its_run_and_worker_as_the_alerts_and_dashboard_read() -> None:
    """The generated PodMonitor gives every series `run` (the pod label the training manifests
    set) and `instance` (the pod, whose name carries the worker's index), as file_sd does."""
    path = paths.ROOT / "deploy/k8s" / operator.TRAINING_COMPONENT / "podmonitor.yaml"
    (monitor,) = yaml.safe_load_all(path.read_text())
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    pod_label = "__meta_kubernetes_pod_label_" + re.sub(r"\W", "_", operator.TRAINING_RUN_LABEL)
    assert {"action": "replace", "sourceLabels": [pod_label],
            "targetLabel": "run"} in endpoint["relabelings"]  # fmt: skip
    assert {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_name"],
            "targetLabel": "instance"} in endpoint["relabelings"]  # fmt: skip
    set_here = {r["targetLabel"] for r in endpoint["relabelings"]}
    rules = training.alerts(config, config.timing())
    read = {label for a in rules for label in re.findall(r"\$labels\.(\w+)", a.description)}
    read |= {label for a in rules for on in re.findall(r"on \(([\w, ]+)\)", a.expr)
             for label in on.split(", ")}  # fmt: skip
    dashboard = (paths.ROOT / "dashboards/tokenpulse-training.json").read_text()
    read |= set(re.findall(r"label_values\([^)]*\}, (\w+)\)", dashboard))
    assert read == {"job", "instance", "run"}
    assert read <= set_here
