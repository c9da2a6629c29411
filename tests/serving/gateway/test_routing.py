"""Version routing: models.config labels, fallbacks, the sticky weighted canary, end to end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.errors import NotFound, UpstreamUnavailable
from serving.gateway.routing import ModelConfigError, Router, canary_bucket, parse_version_labels
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import running_gateway

MODELS_CONFIG = """
# two models; `gen` has a stable and a canary version
model_config_list {
  config {
    name: 'gen'
    base_path: '/models/gen'
    model_platform: 'tensorflow'
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: 'stable' value: 1 }
    version_labels { key: 'canary' value: 2 }
  }
  config { name: "other" base_path: "/models/other" }
}
"""


def test_parse_version_labels() -> None:
    assert parse_version_labels(MODELS_CONFIG) == {"gen": {"stable": 1, "canary": 2}, "other": {}}
    for bad in ("model_config_list { config { name: 'x' ", "model_config_list { config { } }"):
        with pytest.raises(ModelConfigError):
            parse_version_labels(bad)


def _router(weight: float = 0.0) -> Router:
    router = Router(["gen"], canary_weight=weight)
    router.models["gen"].labels = {"stable": 1, "canary": 2}
    router.set_available("gen", [1, 2])
    return router


def test_labels_and_fallbacks() -> None:
    router = _router()
    assert router.route("gen", "k").version == 1
    assert router.route("gen", "k", "canary").version == 2
    with pytest.raises(NotFound):
        router.route("gen", "k", "nightly")
    with pytest.raises(NotFound):
        router.route("nope", "k")
    router.set_available("gen", [2, 3])  # stable's version went away: newest AVAILABLE
    route = router.route("gen", "k")
    assert (route.version, route.label) == (3, None)
    with pytest.raises(UpstreamUnavailable):
        router.route("gen", "k", "stable")
    router.set_available("gen", [])
    with pytest.raises(UpstreamUnavailable):
        router.route("gen", "k")


def test_canary_split_is_within_tolerance_and_sticky() -> None:
    router = _router(weight=0.2)
    callers = [f"user-{i}" for i in range(4000)]
    first = {c: router.route("gen", c).version for c in callers}
    share = sum(v == 2 for v in first.values()) / len(callers)
    assert abs(share - 0.2) < 0.03  # binomial sd is 0.006
    assert all(router.route("gen", c).version == first[c] for c in callers[:500])
    router.canary_weight = 0.5  # raising the weight only moves callers onto the canary
    assert all(router.route("gen", c).version == 2 for c in callers if first[c] == 2)


def test_canary_bucket_is_uniform_per_model() -> None:
    a = [canary_bucket("gen", str(i)) for i in range(2000)]
    assert all(0 <= x < 1 for x in a)
    assert abs(sum(a) / len(a) - 0.5) < 0.03
    assert canary_bucket("gen", "u") != canary_bucket("other", "u")


def test_canary_over_http_reports_the_version_that_served(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str], tmp_path: Path
) -> None:
    standin.state.versions["gen"] = {1: "AVAILABLE", 2: "AVAILABLE"}
    config = tmp_path / "models.config"
    config.write_text(MODELS_CONFIG)
    settings = {
        "model_config_file": str(config),
        "canary_weight": 0.3,
        "status_poll_interval_s": 0.2,
    }
    n = 300
    with running_gateway(standin.url, keys_file, **settings) as gw, httpx.Client() as client:
        served: dict[str, str] = {}
        for i in range(n):
            resp = client.post(
                f"{gw.url}/v1/generate",
                json={"prompt": "hi", "max_new_tokens": 1, "user": f"u{i}"},
                headers=auth(keys["demo"]),
            )
            body = resp.json()
            version = body["model"]["version"]
            # the label was resolved by the gateway and the explicit version really ran
            assert body["text"].endswith(f"(v{version})")
            assert resp.headers["X-Model-Version"] == version
            assert body["model"]["version_label"] == {"1": "stable", "2": "canary"}[version]
            served[f"u{i}"] = version
        share = sum(v == "2" for v in served.values()) / n
        assert abs(share - 0.3) < 0.1  # binomial sd is 0.026
        assert metric_value(gw.url, "tokenpulse_gateway_requests_total", version="2") == sum(
            v == "2" for v in served.values()
        )
        sticky = client.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "again", "max_new_tokens": 1, "user": "u7"},
            headers=auth(keys["demo"]),
        )
        assert sticky.json()["model"]["version"] == served["u7"]
        pinned = client.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "hi", "version_label": "canary"},
            headers=auth(keys["demo"]),
        )
        assert pinned.json()["model"]["version"] == "2"
        unknown = client.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "hi", "version_label": "nightly"},
            headers=auth(keys["demo"]),
        )
        assert unknown.status_code == 404
        # promote: the label moves in models.config, and the gateway follows
        config.write_text(MODELS_CONFIG.replace("value: 1", "value: 2"))
        os.utime(config, (time.time() + 5, time.time() + 5))
        time.sleep(0.6)
        promoted = client.post(
            f"{gw.url}/v1/generate", json={"prompt": "hi"}, headers=auth(keys["demo"])
        )
        assert promoted.json()["model"]["version"] == "2"  # both labels now point at 2


def test_version_that_disappears_is_retried_on_a_fresh_status(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    standin.state.versions["gen"] = {1: "AVAILABLE", 2: "AVAILABLE"}
    with running_gateway(standin.url, keys_file, status_poll_interval_s=60) as gw:
        first = httpx.post(
            f"{gw.url}/v1/generate", json={"prompt": "a"}, headers=auth(keys["demo"])
        )
        assert first.json()["model"]["version"] == "2"
        standin.state.versions["gen"] = {1: "AVAILABLE", 2: "UNLOADING"}  # unloaded between polls
        again = httpx.post(
            f"{gw.url}/v1/generate", json={"prompt": "a"}, headers=auth(keys["demo"])
        )
        assert again.status_code == 200
        assert again.json()["model"]["version"] == "1"
