"""The metrics contract: names, types, label sets, and what one observation records."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from serving.gateway.metrics import ITL_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS, GatewayMetrics
from tests.serving.gateway.fake_continue import FakeContinue, FakeState
from tests.serving.gateway.helpers import auth, samples
from tests.support.gateway import make_keys_file, running_gateway
from tokenpulse.samples import OutputSignals, RequestStats

EXPECTED = {
    "tokenpulse_gateway_requests": "counter",
    "tokenpulse_gateway_request_duration_seconds": "histogram",
    "tokenpulse_gateway_upstream_duration_seconds": "histogram",
    "tokenpulse_gateway_queue_wait_seconds": "histogram",
    "tokenpulse_gateway_time_per_output_token_seconds": "histogram",
    "tokenpulse_gateway_prompt_tokens": "counter",
    "tokenpulse_gateway_output_tokens": "counter",
    "tokenpulse_gateway_request_prompt_tokens": "histogram",
    "tokenpulse_gateway_request_output_tokens": "histogram",
    "tokenpulse_gateway_finish_reason": "counter",
    "tokenpulse_gateway_empty_outputs": "counter",
    "tokenpulse_gateway_repetition_ratio": "histogram",
    "tokenpulse_gateway_mean_nll_nats": "histogram",
    "tokenpulse_gateway_in_flight_requests": "gauge",
    "tokenpulse_gateway_queued_requests": "gauge",
    "tokenpulse_gateway_saturation_ratio": "gauge",
    "tokenpulse_gateway_circuit_breaker_state": "gauge",
    "tokenpulse_gateway_circuit_breaker_rejected": "counter",
    "tokenpulse_gateway_rate_limited": "counter",
    "tokenpulse_gateway_shed": "counter",
    "tokenpulse_gateway_samples_dropped": "counter",
    "tokenpulse_gateway_connections_rejected": "counter",
    "tokenpulse_gateway_upstream_requests": "counter",
    "tokenpulse_gateway_upstream_retries": "counter",
    "tokenpulse_gateway_upstream_healthy": "gauge",
    "tokenpulse_gateway_upstream_in_flight_requests": "gauge",
    "tokenpulse_gateway_feedback": "counter",
    "tokenpulse_gateway_time_to_first_token_seconds": "histogram",
    "tokenpulse_gateway_inter_token_latency_seconds": "histogram",
    "tokenpulse_gateway_requests_by_mode": "counter",
    "tokenpulse_gateway_client_disconnects": "counter",
}
ALLOWED_LABELS = {
    "model", "version", "route", "code", "finish_reason", "reason", "le", "replica", "outcome",
    "score_class", "mode",
}  # fmt: skip


def _stats(**kw: object) -> RequestStats:
    base = {
        "request_id": "r1",
        "route": "completions",
        "model": "gen",
        "version": "2",
        "key_id": "secret-key-id",
        "upstream_s": 0.4,
        "total_s": 0.5,
        "queue_wait_s": 0.01,
        "outputs": [
            OutputSignals(5, 4, "length", False, 0.25, 1.5),
            OutputSignals(3, 2, "stop", True, 0.0, 2.5),
        ],
    }
    base.update(kw)
    return RequestStats(**base)  # type: ignore[arg-type]


def test_every_metric_is_declared_with_its_type() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats())
    found = {f.name: f.type for f in m.registry.collect()}
    assert found == EXPECTED


def test_labels_never_carry_key_user_or_prompt() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats(rate_limited="tokens", shed=True, breaker_rejected=True, status=429))
    for family in m.registry.collect():
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, family.name
            assert "secret-key-id" not in sample.labels.values()


def test_observe_records_one_request() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats())
    get = m.registry.get_sample_value
    out = {"model": "gen", "version": "2", "route": "completions"}
    assert get("tokenpulse_gateway_requests_total", {**out, "code": "200"}) == 1
    assert get("tokenpulse_gateway_output_tokens_total", out) == 6
    assert get("tokenpulse_gateway_prompt_tokens_total", out) == 8
    assert get("tokenpulse_gateway_empty_outputs_total", out) == 1
    assert get("tokenpulse_gateway_finish_reason_total", {**out, "finish_reason": "stop"}) == 1
    assert get("tokenpulse_gateway_request_output_tokens_count", out) == 2
    assert get("tokenpulse_gateway_mean_nll_nats_sum", out) == 4.0
    # both rows decode side by side: time per token divides by the longest output
    assert get("tokenpulse_gateway_time_per_output_token_seconds_sum", out) == 0.1
    assert get("tokenpulse_gateway_repetition_ratio_bucket", {**out, "le": "0.0"}) == 1


def test_errors_count_without_outputs() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats(status=503, shed=True, outputs=[], upstream_s=0.0, version=""))
    get = m.registry.get_sample_value
    labels = {"model": "gen", "route": "completions"}
    assert get("tokenpulse_gateway_shed_total", labels) == 1
    assert get("tokenpulse_gateway_requests_total", {**labels, "version": "", "code": "503"}) == 1
    assert get("tokenpulse_gateway_output_tokens_total", {**labels, "version": ""}) is None


def test_unknown_models_and_finish_reasons_fold_into_one_value() -> None:
    m = GatewayMetrics(models=["gen"])
    for i in range(1000):
        m.observe(_stats(model=f"bogus-{i}", status=404, outputs=[], upstream_s=0.0, version=""))
    m.observe(_stats(outputs=[OutputSignals(1, 1, "made-up-reason", False, 0.0, 1.0)]))
    get = m.registry.get_sample_value
    unknown = {"model": "__unknown__", "version": "", "route": "completions", "code": "404"}
    assert get("tokenpulse_gateway_requests_total", unknown) == 1000
    labels = {"model": "gen", "version": "2", "route": "completions"}
    assert (
        get("tokenpulse_gateway_finish_reason_total", {**labels, "finish_reason": "__unknown__"})
        == 1
    )
    models = {s.labels.get("model") for f in m.registry.collect() for s in f.samples}
    assert models <= {"gen", "__unknown__", None}


def test_a_stream_records_ttft_inter_token_latency_and_tpot_without_prefill() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(
        _stats(
            mode="stream",
            time_to_first_token_s=0.2,
            decode_s=0.3,  # 4 tokens after the first 3, in two more chunks
            chunks=3,
            chunk_gaps=[(0.2, 2), (0.1, 2)],
            outputs=[OutputSignals(5, 7, "length", False, 0.25, 1.5)],
        )
    )
    get = m.registry.get_sample_value
    out = {"model": "gen", "version": "2", "route": "completions"}
    assert get("tokenpulse_gateway_time_to_first_token_seconds_sum", out) == 0.2
    assert get("tokenpulse_gateway_inter_token_latency_seconds_count", out) == 4
    assert abs(get("tokenpulse_gateway_inter_token_latency_seconds_sum", out) - 0.3) < 1e-9
    # vLLM's TPOT: (last - first token) / (tokens - 1), the prefill left out
    assert abs(get("tokenpulse_gateway_time_per_output_token_seconds_sum", out) - 0.05) < 1e-9
    assert get("tokenpulse_gateway_requests_by_mode_total", {**out, "mode": "stream"}) == 1
    assert get("tokenpulse_gateway_client_disconnects_total", out) == 0


def test_unary_requests_count_by_mode_without_ttft() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats())
    get = m.registry.get_sample_value
    out = {"model": "gen", "version": "2", "route": "completions"}
    assert get("tokenpulse_gateway_requests_by_mode_total", {**out, "mode": "unary"}) == 1
    assert get("tokenpulse_gateway_time_to_first_token_seconds_count", out) == 0


def test_a_disconnect_is_counted_as_its_own_outcome() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(
        _stats(mode="stream", status=499, error_code="client_disconnected", disconnected=True)
    )
    get = m.registry.get_sample_value
    out = {"model": "gen", "version": "2", "route": "completions"}
    assert get("tokenpulse_gateway_client_disconnects_total", out) == 1
    assert get("tokenpulse_gateway_requests_total", {**out, "code": "499"}) == 1


def test_a_disconnect_before_the_first_chunk_is_counted_too() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats(mode="stream", status=499, disconnected=True, upstream_s=0.0, outputs=[]))
    out = {"model": "gen", "version": "2", "route": "completions"}
    assert m.registry.get_sample_value("tokenpulse_gateway_client_disconnects_total", out) == 1


def test_exemplars_carry_the_request_id_in_openmetrics_only() -> None:
    m = GatewayMetrics(models=["gen"])
    m.observe(_stats(request_id="abc123", mode="stream", time_to_first_token_s=0.05))
    page, content_type = m.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    text = page.decode()
    for name in ("request_duration_seconds", "time_to_first_token_seconds", "mean_nll_nats"):
        lines = [
            ln for ln in text.splitlines() if ln.startswith(f"tokenpulse_gateway_{name}_bucket")
        ]
        assert any('# {request_id="abc123"}' in ln for ln in lines), name
    classic, content_type = m.exposition("text/plain")
    assert content_type.startswith("text/plain") and b"request_id" not in classic


ROUTES = ("generate", "completions", "chat")  # the generation endpoints' route label values
STREAM_HISTOGRAMS = {
    "tokenpulse_gateway_time_to_first_token_seconds": TTFT_BUCKETS,
    "tokenpulse_gateway_inter_token_latency_seconds": ITL_BUCKETS,
    "tokenpulse_gateway_time_per_output_token_seconds": TPOT_BUCKETS,
}
ZEROED = (  # counters whose every closed-set combination must exist before its first event
    "tokenpulse_gateway_requests_total",
    "tokenpulse_gateway_requests_by_mode_total",
    "tokenpulse_gateway_feedback_total",
    "tokenpulse_gateway_finish_reason_total",
    *(f"{name}_count" for name in STREAM_HISTOGRAMS),
)


def _series(url: str) -> dict[str, set[frozenset[tuple[str, str]]]]:
    return {
        name: {frozenset(labels.items()) for labels, _ in samples(url, name)} for name in ZEROED
    }


def test_a_versions_series_exist_at_zero_before_its_first_request_then_move(
    tmp_path: Path,
) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    version = {"model": "gen", "version": "1"}
    with (
        FakeContinue(FakeState(outputs={"p": b"abcdefgh"})) as up,
        running_gateway(
            up.url, tmp_path / "keys.json", stream_chunk_tokens=4, stream_first_chunk_tokens=4
        ) as gw,
    ):
        ttft = "tokenpulse_gateway_time_to_first_token_seconds_count"
        deadline = time.monotonic() + 10
        while not samples(gw.url, ttft, **version) and time.monotonic() < deadline:
            time.sleep(0.1)  # until the status poll has seen version 1 AVAILABLE
        # no request yet: every closed-set combination of version 1 is there, at 0
        for route in ROUTES:
            labels = {**version, "route": route}
            for name, buckets in STREAM_HISTOGRAMS.items():
                assert [v for _, v in samples(gw.url, f"{name}_count", **labels)] == [0.0], name
                bucket = samples(gw.url, f"{name}_bucket", **labels)
                assert len(bucket) == len(buckets) + 1 and {v for _, v in bucket} == {0.0}, name
            for code in ("200", "499", "502", "503", "504"):
                got = samples(gw.url, "tokenpulse_gateway_requests_total", **labels, code=code)
                assert [v for _, v in got] == [0.0], (route, code)
            # the latency SLI's histogram, of answered requests (an error's duration is no SLI)
            got = samples(gw.url, "tokenpulse_gateway_request_duration_seconds_count", **labels)
            assert [(s["code"], v) for s, v in got] == [("200", 0.0)], route
            for mode in ("stream", "unary"):
                got = samples(gw.url, "tokenpulse_gateway_requests_by_mode_total", **labels,
                              mode=mode)  # fmt: skip
                assert [v for _, v in got] == [0.0], (route, mode)
        for score_class in ("negative", "neutral", "positive"):
            got = samples(gw.url, "tokenpulse_gateway_feedback_total", **version,
                          score_class=score_class)  # fmt: skip
            assert [v for _, v in got] == [0.0], score_class
        before = _series(gw.url)

        # one stream moves its route's series: 8 bytes in chunks of 4
        body = {"model": "gen", "prompt": "p", "max_tokens": 8, "stream": True}
        resp = httpx.post(f"{gw.url}/v1/completions", headers=auth(key), json=body)
        assert resp.status_code == 200
        for route in ROUTES:
            labels = {**version, "route": route}
            moved = route == "completions"
            counts = {
                name: sum(v for _, v in samples(gw.url, f"{name}_count", **labels))
                for name in STREAM_HISTOGRAMS
            }
            assert counts == {
                "tokenpulse_gateway_time_to_first_token_seconds": 1.0 if moved else 0.0,
                "tokenpulse_gateway_inter_token_latency_seconds": 4.0 if moved else 0.0,
                "tokenpulse_gateway_time_per_output_token_seconds": 1.0 if moved else 0.0,
            }, route
        # unary answers on the other routes, and a refusal, add no series: all existed already
        for path, payload in (
            ("/v1/generate", {"prompt": "p", "max_new_tokens": 4}),
            ("/v1/chat/completions",
             {"model": "gen", "messages": [{"role": "user", "content": "p"}], "max_tokens": 4}),
        ):  # fmt: skip
            assert httpx.post(f"{gw.url}{path}", headers=auth(key), json=payload).status_code == 200
        up.state.reject_from_call = 1
        refused = httpx.post(f"{gw.url}/v1/completions", headers=auth(key), json=body)
        assert refused.status_code == 502
        assert _series(gw.url) == before


def test_only_served_models_versions_are_created_and_only_once() -> None:
    m = GatewayMetrics(models=["gen"])
    m.version_available("not-served", "1")  # not a model of this gateway: nothing
    models = {s.labels.get("model") for f in m.registry.collect() for s in f.samples}
    assert models <= {"gen", None}
    m.version_available("gen", "3")
    page = m.render()
    m.version_available("gen", "3")
    assert m.render() == page
    get = m.registry.get_sample_value
    labels = {"model": "gen", "version": "3", "route": "chat"}
    assert get("tokenpulse_gateway_requests_total", {**labels, "code": "502"}) == 0
    assert get("tokenpulse_gateway_finish_reason_total", {**labels, "finish_reason": "stop"}) == 0
