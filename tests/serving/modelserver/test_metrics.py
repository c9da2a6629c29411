"""TF Serving's exposition quirks, checked on the registry itself."""

from __future__ import annotations

from serving.modelserver.metrics import (
    LATENCY_US,
    Counter,
    Histogram,
    ServingMetrics,
    exponential_buckets,
    fmt_double,
)

# TF Serving's request latency buckets: Exp(10, 1.8, 33), as TF Serving prints them.
EXPECTED_LATENCY_LE = (
    "10,18,32.4,58.32,104.976,188.957,340.122,612.22,1102,1983.59,3570.47,6426.84,11568.3,20823,"
    "37481.3,67466.4,121440,218591,393464,708235,1.27482e+06,2.29468e+06,4.13043e+06,7.43477e+06,"
    "1.33826e+07,2.40887e+07,4.33596e+07,7.80473e+07,1.40485e+08,2.52873e+08,4.55172e+08,"
    "8.19309e+08,1.47476e+09"
).split(",")


def test_latency_bucket_bounds_print_with_six_significant_digits() -> None:
    assert [fmt_double(b) for b in LATENCY_US] == EXPECTED_LATENCY_LE
    queuing = exponential_buckets(100, 1.2, 52)
    assert fmt_double(queuing[-1]) == "1.09205e+06"


def test_buckets_count_values_strictly_below_the_bound() -> None:
    h = Histogram("/t/h", [], exponential_buckets(1, 2, 14))
    for v in (2, 20, 200):
        h.observe(v)
    lines = h.lines()
    assert 'h_bucket{le="2"} 0' in "\n".join(lines).replace(":t:", "")
    assert ':t:h_bucket{le="4"} 1' in lines
    assert ':t:h_bucket{le="32"} 2' in lines
    assert ':t:h_bucket{le="+Inf"} 3' in lines
    assert lines[-2:] == [":t:h_sum{} 222", ":t:h_count{} 3"]


def test_unlabelled_counter_prints_empty_braces_and_no_help() -> None:
    c = Counter("/tensorflow/core/graph_runs")
    c.inc(amount=5)
    assert c.lines() == [
        "# TYPE :tensorflow:core:graph_runs counter",
        ":tensorflow:core:graph_runs{} 5",
    ]


def test_labels_keep_declared_order_and_escape_only_backslash_and_quote() -> None:
    c = Counter("/tensorflow/serving/request_count", ["model_name", "status"])
    c.inc('we"ird\\name\n', "OK")
    line = c.lines()[1]
    assert (
        line == ':tensorflow:serving:request_count{model_name="we\\"ird\\\\name\n",status="OK"} 1'
    )


def test_labelled_histogram_puts_le_last() -> None:
    h = Histogram(
        "/tensorflow/serving/request_latency", ["model_name", "API", "entrypoint"], LATENCY_US
    )
    h.observe(1102, "gen", "predict", "REST")
    lines = h.lines()
    assert lines[0] == "# TYPE :tensorflow:serving:request_latency histogram"
    prefix = (
        ":tensorflow:serving:request_latency_bucket"
        '{model_name="gen",API="predict",entrypoint="REST",'
    )
    assert f'{prefix}le="1102"}} 0' in lines
    assert f'{prefix}le="1983.59"}} 1' in lines


def test_page_is_sorted_by_internal_name_and_ends_with_newline() -> None:
    m = ServingMetrics()
    page = m.render()
    assert page.endswith("\n") and "# HELP" not in page
    types = [line.split()[2] for line in page.splitlines() if line.startswith("# TYPE")]
    internal = [t.replace(":", "/") for t in types]
    assert internal == sorted(internal)
    # metrics without cells print only their TYPE line
    assert "# TYPE :tensorflow:serving:request_count counter\n# TYPE" in page
    # batching sizes appear only once a batch ran (TF registers them lazily)
    assert "input_batch_size" not in page
    m.batch_recorded()
    assert "# TYPE :tensorflow:serving:batching_session:input_batch_size histogram" in m.render()
