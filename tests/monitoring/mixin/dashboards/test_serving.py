"""The TF Serving dashboard: a `$version` for its sample links, no dead padding panel, and warmup
legends read from the servable's path rather than showing it."""

from __future__ import annotations

import pytest

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_model, serving
from monitoring.mixin.dashboards.queries import metric_names, substitute


@pytest.fixture(scope="module")
def model() -> dict:
    return build_model(config, "serving")


def _panels(model: dict) -> dict[str, dict]:
    return {p["title"]: p for p in model["panels"] if p["type"] != "row"}


def test_error_and_latency_panels_link_the_samples_of_model_version_and_window(model) -> None:
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert "tokenpulse_tfserving_model_version_state" in variables["version"]["query"]
    panels = _panels(model)
    for title in ("Requests/s by status", "Request latency (predict)", "Runtime latency"):
        (url,) = [
            lk["url"]
            for lk in panels[title]["links"]
            if lk["url"].startswith(config.links.kibana_url)
        ]
        assert "${version:regex}" in url and "${model:regex}" in url and "${__from:date:iso}" in url
        assert "--version $version" in panels[title]["description"]


def test_no_panel_shows_padding(model) -> None:
    """The shipped batching config allows every batch size, so TF Serving never pads."""
    used = {
        m for p in model["panels"] for t in p.get("targets", []) for m in metric_names(t["expr"])
    }
    assert not any("padding" in m for m in used)


def test_warmup_legend_reads_base_folder_and_version_from_the_path(model, promql) -> None:
    (target,) = _panels(model)["Warmup"]["targets"]
    assert "model_path" not in target["legendFormat"]
    path = "/tmp/pytest-of-root/pytest-107/dash-stack0/models/gen/12"
    metric = ":tensorflow:serving:model_warmup_latency"
    labels = f'job="{config.jobs.modelserver}", model_path="{path}", status="OK"'
    promql(
        [{"series": f"{metric}_sum{{{labels}}}", "values": "3000000x5"},
         {"series": f"{metric}_count{{{labels}}}", "values": "2x5"}],
        [{"expr": substitute(target["expr"], "1m"), "eval_time": "4m",
          "exp_samples": [{"labels": f'{{base="gen", version="12", model_path="{path}"}}',
                           "value": 1.5}]}],
    )  # fmt: skip
    assert serving.SERVABLE_PATH in target["expr"]
