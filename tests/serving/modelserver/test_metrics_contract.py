"""The live metrics page parses with Prometheus' own parser and carries TF Serving's contract."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.serving.modelserver.test_metrics import EXPECTED_LATENCY_LE
from tests.support.modelserver import ModelServerProcess
from tokenpulse.tfserving.signature import default_row

EXPECTED = {
    # name: (type, label names in order, le bounds or None)
    ":tensorflow:serving:request_count": ("counter", ["model_name", "status"], None),
    ":tensorflow:serving:request_latency": (
        "histogram",
        ["model_name", "API", "entrypoint"],
        EXPECTED_LATENCY_LE,
    ),
    ":tensorflow:serving:runtime_latency": (
        "histogram",
        ["model_name", "API", "runtime"],
        EXPECTED_LATENCY_LE,
    ),
    ":tensorflow:serving:model_warmup_latency": (
        "histogram",
        ["model_path", "status"],
        EXPECTED_LATENCY_LE,
    ),
    ":tensorflow:serving:model_warmup_records_read": ("counter", ["model_path", "status"], None),
    ":tensorflow:serving:batching_session:queuing_latency": (
        "histogram",
        ["thread_pool_name"],
        None,
    ),
    ":tensorflow:serving:batching_session:wrapped_run_count": ("counter", [], None),
    ":tensorflow:serving:batching_session:input_batch_size": (
        "histogram",
        [],
        [str(2**i) for i in range(14)],
    ),
    ":tensorflow:serving:batching_session:processed_batch_size": (
        "histogram",
        [],
        [str(2**i) for i in range(14)],
    ),
    ":tensorflow:serving:batching_session:padding_size": (
        "histogram",
        ["execution_batch_size"],
        [str(2**i) for i in range(14)],
    ),
    ":tensorflow:cc:saved_model:load_attempt_count": ("counter", ["model_path", "status"], None),
    ":tensorflow:core:graph_runs": ("counter", [], None),
}


def test_page_parses_and_matches_the_contract(server: ModelServerProcess) -> None:
    httpx.post(
        f"{server.rest_url}/v1/models/gen:predict",
        json={"instances": [default_row("c", 2)]},
        timeout=60,
    ).raise_for_status()
    text = server.metrics_text()
    assert "# HELP" not in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, (kind, labels, buckets) in EXPECTED.items():
        family = families.get(name)
        assert family is not None, name
        assert family.type == kind, name
        samples = family.samples
        assert samples, name
        for sample in samples:
            assert [k for k in sample.labels if k != "le"] == labels, (name, sample.labels)
        if buckets is not None:
            first = dict(samples[0].labels)
            les = [
                s.labels["le"]
                for s in samples
                if s.name.endswith("_bucket")
                and {k: v for k, v in s.labels.items() if k != "le"}
                == {k: v for k, v in first.items() if k != "le"}
            ]
            assert les == [*buckets, "+Inf"], name
    # counters keep TF's names: no _total suffix on the page
    assert ":tensorflow:serving:request_count{" in text
    assert ":tensorflow:core:graph_runs{} " in text
    # the warmup of both versions ran (6 records each) and each version loaded once
    warm = families[":tensorflow:serving:model_warmup_records_read"].samples
    assert sorted(s.labels["status"] for s in warm) == ["OK", "OK"]
    loads = families[":tensorflow:cc:saved_model:load_attempt_count"].samples
    assert {s.labels["status"] for s in loads} == {"success"}


def test_bucket_lines_are_cumulative_and_count_equals_inf(server: ModelServerProcess) -> None:
    text = server.metrics_text()
    fam = next(
        f
        for f in text_string_to_metric_families(text)
        if f.name == ":tensorflow:serving:runtime_latency"
    )
    buckets = [s.value for s in fam.samples if s.name.endswith("_bucket")]
    count = next(s.value for s in fam.samples if s.name.endswith("_count"))
    assert buckets == sorted(buckets) and buckets[-1] == count > 0
