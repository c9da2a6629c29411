"""`GET /v1/models`: the models a key may use, with versions and labels as the router has them."""

from __future__ import annotations

import httpx

from serving.gateway.keys import ApiKey
from serving.gateway.models import ModelList, VersionCaps, listing
from serving.gateway.routing import Router
from tests.serving.gateway.helpers import auth
from tests.support.gateway import make_keys_file, running_gateway


def test_listing_shows_versions_newest_first_and_labels_for_the_keys_models() -> None:
    router = Router(["gen", "other"])
    router.set_available("gen", [1, 3, 2])
    router.models["gen"].labels = {"stable": 2, "canary": 3}
    caps = {("gen", v): VersionCaps(streams=v > 1, stop_in_graph=False) for v in (1, 2, 3)}
    everything = listing(router, ApiKey("a", "h"), 128, caps)
    assert [m.id for m in everything.data] == ["gen", "other"]
    gen = everything.data[0]
    assert gen.tokenpulse.versions == ["3", "2", "1"]
    assert gen.tokenpulse.labels == {"canary": "3", "stable": "2"}
    assert gen.max_model_len == 128 and gen.tokenpulse.stop_in_graph is False
    assert gen.tokenpulse.streams is False  # version 1 exports no `continue`
    assert everything.data[1].tokenpulse.streams is None  # no version known yet
    others = listing(router, ApiKey("b", "h", models=("other",)), 128).data
    assert [m.id for m in others] == ["other"]
    doc = everything.model_dump()
    assert ModelList.model_validate(doc).model_dump() == doc
    assert doc["object"] == "list" and doc["data"][0]["object"] == "model"


def test_the_endpoint_needs_a_key(tmp_path, standin) -> None:
    key = make_keys_file(tmp_path / "keys.json", demo={})["demo"]
    with running_gateway(standin.url, tmp_path / "keys.json") as gw:
        refused = httpx.get(f"{gw.url}/v1/models")
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == "invalid_api_key"
        listed = httpx.get(f"{gw.url}/v1/models", headers=auth(key))
        assert listed.status_code == 200 and listed.json()["data"][0]["id"] == "gen"
