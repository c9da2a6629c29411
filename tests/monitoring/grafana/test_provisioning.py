"""Grafana provisioning files agree with the components, the compose file and the push command."""

from __future__ import annotations

import yaml

from monitoring.grafana.settings import PushSettings
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards.panels import REQUEST_ID, kibana_request_url
from tokenpulse.paths import ROOT

PROVISIONING = ROOT / "monitoring" / "grafana" / "provisioning"


def _load(kind: str) -> dict:
    (path,) = (PROVISIONING / kind).glob("*.yaml")
    doc = yaml.safe_load(path.read_text())
    assert doc["apiVersion"] == 1
    return doc


def test_prometheus_is_the_one_datasource():
    # samples are read in Kibana (the quality panels link there), so Grafana holds no ES secret
    sources = {d["type"]: d for d in _load("datasources")["datasources"]}
    assert set(sources) == {"prometheus"}
    prom = sources["prometheus"]
    assert prom["isDefault"] and prom["access"] == "proxy"
    assert prom["jsonData"]["timeInterval"] == config.scrape_interval


def test_dashboard_provider_reads_the_mounted_dashboards_into_the_push_folder():
    (provider,) = _load("dashboards")["providers"]
    assert provider["type"] == "file" and provider["allowUiUpdates"] is False
    assert provider["folderUid"] == PushSettings.model_fields["folder_uid"].default
    grafana = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["grafana"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    assert mounts[provider["options"]["path"]] == "./dashboards"
    assert mounts["/etc/grafana/provisioning"] == "./monitoring/grafana/provisioning"
    assert not any("ES" in name for name in grafana["environment"])


def test_exemplars_link_their_request_to_its_sample_in_kibana():
    (prom,) = _load("datasources")["datasources"]
    (destination,) = prom["jsonData"]["exemplarTraceIdDestinations"]
    assert destination["name"] == config.exemplar_label
    # `$$` is provisioning's escape for a literal `$`: Grafana then fills in the exemplar's value
    url = destination["url"].replace("$$", "$")
    assert url == kibana_request_url(config) and REQUEST_ID in url
    assert "$" not in destination["url"].replace("$${", "")
    assert url.startswith(config.links.kibana_url) and "genai_sample.request_id" in url
