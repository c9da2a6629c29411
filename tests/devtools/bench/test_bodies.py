"""The large predict body the bodies bench sends."""

from __future__ import annotations

import json

from devtools.bench.bodies import MB, large_body
from tokenpulse.tfserving.signature import INPUTS


def test_large_body_is_valid_instances_json_of_the_size_asked() -> None:
    body = large_body(2.0)
    assert abs(len(body) - 2 * MB) < 0.01 * MB
    rows = json.loads(body)["instances"]
    assert len(rows) > 1_000
    assert set(rows[0]) == set(INPUTS)
