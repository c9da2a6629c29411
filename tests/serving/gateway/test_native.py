"""The native response is built without validation; what it builds is what its models accept."""

from __future__ import annotations

import json

from serving.gateway import native
from serving.gateway.errors import dump
from serving.gateway.jobs import Job
from tokenpulse.samples import OutputSignals, RequestStats


def _job() -> Job:
    return Job("gen", ["hi"], 4, temperature=0.0, top_k=0, top_p=1.0, seed=7)


def _stats(label: str = "") -> RequestStats:
    stats = RequestStats(request_id="r1", route="generate", model="gen", version="3")
    stats.version_label = label
    stats.upstream_s, stats.total_s, stats.queue_wait_s = 0.0123456789, 0.02, 0.0
    stats.outputs.append(OutputSignals(2, 4, "length", False, 0.1234567, 1.5, 0))
    return stats


def test_the_constructed_response_is_one_its_model_validates_to_the_same_json() -> None:
    for label in ("", "stable"):
        built = dump(native.respond(_job(), ["hello"], _stats(label)))
        checked = native.GenerateResponse.model_validate_json(built)
        assert dump(checked) == built
        doc = json.loads(built)
        assert doc["model"]["version_label"] == (label or None)
        assert doc["usage"]["total_tokens"] == 6
        assert doc["timings"]["upstream_s"] == 0.012346
