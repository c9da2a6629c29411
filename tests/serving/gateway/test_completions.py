"""The completions response is built without validation; its models accept what it builds."""

from __future__ import annotations

import json

from serving.gateway import completions
from serving.gateway.errors import dump
from serving.gateway.jobs import Job
from tokenpulse.samples import OutputSignals, RequestStats


def test_the_constructed_response_is_one_its_model_validates_to_the_same_json() -> None:
    job = Job("gen", ["a", "b"], 4, temperature=1.0, top_k=0, top_p=1.0, seed=7)
    stats = RequestStats(request_id="r2", route="completions", model="gen", version="1")
    stats.outputs += [
        OutputSignals(1, 4, "length", False, 0.0, 1.5, 0),
        OutputSignals(1, 0, "stop", True, 0.0, 0.0, 0),
    ]
    built = dump(completions.respond(job, ["x", ""], stats))
    checked = completions.CompletionResponse.model_validate_json(built)
    assert dump(checked) == built
    doc = json.loads(built)
    assert doc["object"] == "text_completion"
    assert [c["logprobs"] for c in doc["choices"]] == [None, None]
    assert doc["usage"] == {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}
