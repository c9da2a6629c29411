"""`tokenpulse bench <name>`: benchmarks that print figures and ratios, never run by the runtime.

The `tokenpulse` CLI (stack/cli.py) offers this table when `devtools` is importable, which is so
in a checkout and not in the wheel or the image.
"""

from __future__ import annotations

# `tokenpulse bench <name>` -> (module, one-line help)
BENCHES: dict[str, tuple[str, str]] = {
    "model": ("devtools.bench.model", "tokens/s, KV-cache scaling, FLOP/s vs keras_hub GPT-2"),
    "batching": ("devtools.bench.batching", "model server with dynamic batching on vs off"),
    "continuation": (
        "devtools.bench.continuation",
        "streamed `continue` chunks vs unary: tokens/s, mean batch",
    ),
    "streaming": (
        "devtools.bench.streaming",
        "SSE through the gateway vs unary: TTFT, throughput and mean batch",
    ),
    "gateway": ("devtools.bench.gateway", "gateway overhead vs calling the model server"),
    "launch": ("devtools.bench.launch", "a component's start: exec'd vs forked from the zygote"),
    "malloc": ("devtools.bench.malloc", "TensorFlow's CPU on glibc's malloc vs tcmalloc"),
    "scale": ("devtools.bench.scale", "throughput at 1, 2 and 3 model-server replicas"),
    "exporter": ("devtools.bench.exporter", "exporter scrape latency and RSS"),
    "pipeline": ("devtools.bench.pipeline", "shipper docs/s, delivery delay, sampling cost"),
    "bodies": ("devtools.bench.bodies", "model server RSS and stalls around one large body"),
    "redaction": ("devtools.bench.redaction", "recall and false positives per kind, cost per text"),
    "training": ("devtools.bench.training", "training step time with and without histograms"),
    "stops": (
        "devtools.bench.stops",
        "stop sequence ending decoding in the graph vs trimming after max_tokens",
    ),
    "tokenizer": (
        "devtools.bench.tokenizer",
        "in-graph BPE cost per MB: ordinary text vs one very long word",
    ),
}
