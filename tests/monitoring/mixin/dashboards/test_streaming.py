"""The overview's streaming row shows the gateway's stream metrics, exemplars on the histograms
whose exemplars carry a request id (latency, TTFT, NLL)."""

from __future__ import annotations

from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import build_model
from monitoring.mixin.dashboards.queries import metric_names
from serving.gateway.metrics import EXEMPLAR_LABEL, MODES

STREAM_METRICS = {
    "tokenpulse_gateway_time_to_first_token_seconds_bucket",
    "tokenpulse_gateway_inter_token_latency_seconds_bucket",
    "tokenpulse_gateway_time_per_output_token_seconds_bucket",
    "tokenpulse_gateway_requests_by_mode_total",
    "tokenpulse_gateway_client_disconnects_total",
}


def _panels(key: str) -> dict[str, dict]:
    return {p["title"]: p for p in build_model(config, key)["panels"] if p["type"] != "row"}


def test_every_stream_metric_has_a_panel() -> None:
    targets = [t for p in _panels("slo").values() for t in p["targets"]]
    used = {m for t in targets for m in metric_names(t["expr"])}
    assert STREAM_METRICS <= used
    (by_mode, _) = _panels("slo")["Streamed and unary requests"]["targets"]
    assert by_mode["legendFormat"] == "{{mode}}" and len(MODES) == 2


def test_exemplars_on_latency_ttft_and_nll_and_their_label_is_the_gateways() -> None:
    assert config.exemplar_label == EXEMPLAR_LABEL
    shown = {
        (key, title)
        for key in ("slo", "quality")
        for title, p in _panels(key).items()
        if any(t.get("exemplar") for t in p["targets"])
    }
    assert shown == {("slo", "Latency percentiles"), ("slo", "Time to first token"),
                     ("quality", "Mean NLL per token")}  # fmt: skip
    for key, title in shown:
        panel = _panels(key)[title]
        # exemplars hang on buckets: each such panel reads a histogram's buckets
        assert any("_bucket{" in t["expr"] for t in panel["targets"]), title
        assert f"<{config.exemplar_label}>" in panel["description"], title


def test_ttft_threshold_is_the_ttft_slo_when_there_is_one() -> None:
    panel = _panels("slo")["Time to first token"]
    top = panel["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"]
    slo = next((s for s in config.slos if s.name == "ttft"), None)
    assert top == (float(slo.threshold_le) if slo else 1.0)
    assert any(link["url"].startswith(config.links.kibana_url) for link in panel["links"])
