"""`tokenpulse es setup`: idempotent install, clear errors for auth and versions."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest

from devtools.standins.es import EsStandin
from log_pipeline import assets, setup
from log_pipeline.outputs import Item, Outcome
from log_pipeline.outputs.elasticsearch import ElasticsearchOutput, make_client
from log_pipeline.settings import EsAuth
from stack.cli import main


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[..., Done]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Runner:
    """`tokenpulse es setup ARGS` in this process (the env cannot leak settings in)."""
    for name in (
        "ES_URL",
        "ES_API_KEY",
        "ES_USERNAME",
        "ES_PASSWORD",
        "KIBANA_URL",
        "KIBANA_API_KEY",
        "SHIPPER_USER",
        "SHIPPER_PASSWORD",
        "READER_USER",
        "READER_PASSWORD",
    ):
        monkeypatch.delenv(f"TOKENPULSE_ES_{name}", raising=False)

    def _run(*args: str) -> Done:
        code = main(["es", "setup", *args])
        out = capsys.readouterr()
        return Done(code, out.out, out.err)

    return _run


def test_installs_everything_twice_without_harm(run: Runner) -> None:
    with EsStandin() as es:
        for _ in range(2):
            done = run("--es-url", es.url, "--kibana-url", es.url)
            assert done.returncode == 0, done.stderr
        assert set(es.resources) == {
            f"_ilm/{assets.ILM_POLICY}",
            f"_component_template/{assets.SETTINGS_COMPONENT}",
            f"_component_template/{assets.MAPPINGS_COMPONENT}",
            f"_index_template/{assets.INDEX_TEMPLATE}",
        }
        assert es.resources[f"_index_template/{assets.INDEX_TEMPLATE}"]["priority"] == 500
        assert assets.DEFAULT_STREAM in es.streams
        assert len(es.saved_objects) == len(assets.kibana_objects())
        assert "already there" in done.stdout


def test_authentication_failure_is_one_clear_line(run: Runner) -> None:
    with EsStandin(api_key="right") as es:
        done = run("--es-url", es.url, "--es-api-key", "wrong")
    assert done.returncode == 1
    assert "authentication failed" in done.stderr and "Traceback" not in done.stderr


def test_user_and_password_sign_in_to_elasticsearch_and_kibana(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compose deployment runs with security on and signs in as `elastic`."""
    with EsStandin(basic_auth="elastic:s3cret") as es:
        monkeypatch.setenv("TOKENPULSE_ES_ES_PASSWORD", "s3cret")
        done = run("--es-url", es.url, "--kibana-url", es.url, "--es-username", "elastic")
        assert done.returncode == 0, done.stderr
        assert len(es.saved_objects) == len(assets.kibana_objects())
        monkeypatch.setenv("TOKENPULSE_ES_ES_PASSWORD", "wrong")
        done = run("--es-url", es.url, "--es-username", "elastic")
    assert done.returncode == 1
    assert "authentication failed" in done.stderr and "Traceback" not in done.stderr
    assert "wrong" not in done.stderr


def test_key_and_user_together_or_user_without_password_exit_2(run: Runner) -> None:
    done = run("--es-url", "http://127.0.0.1:9", "--es-api-key", "k", "--es-username", "u")
    assert done.returncode == 2 and "not both" in done.stderr
    done = run("--es-url", "http://127.0.0.1:9", "--es-username", "u")
    assert done.returncode == 2 and "needs es_password" in done.stderr


def test_version_mismatch_is_one_clear_line(run: Runner) -> None:
    with EsStandin(version="8.17.0") as es:
        done = run("--es-url", es.url)
    assert done.returncode == 1
    assert "Elasticsearch 9 is required" in done.stderr and "Traceback" not in done.stderr


def test_old_kibana_and_unreachable_es(run: Runner) -> None:
    with EsStandin() as es, EsStandin(version="9.0.0") as kibana:
        kibana.version = "8.8.2"  # the saved objects are in Kibana 8.9's format
        done = run("--es-url", es.url, "--kibana-url", kibana.url)
        assert done.returncode == 1 and "version" in done.stderr and "8.8.2" in done.stderr
        port = es.port
    done = run("--es-url", f"http://127.0.0.1:{port}")
    assert done.returncode == 1 and "unreachable" in done.stderr
    done = run("--es-url", "ftp://x")
    assert done.returncode == 2 and "--es-url" in done.stderr


def test_a_plain_index_under_the_streams_name_is_refused(run: Runner) -> None:
    """A shipper of old (no require_data_stream) auto-created a plain index before `es setup`:
    setup must not report the data stream as "already there"."""
    with EsStandin() as es:
        doc = {"@timestamp": "2026-01-01T00:00:00.000Z"}
        body = json.dumps({"create": {"_id": "a"}}) + "\n" + json.dumps(doc) + "\n"
        httpx.post(f"{es.url}/{assets.DEFAULT_STREAM}/_bulk", content=body,
                   headers={"Content-Type": "application/x-ndjson"}).raise_for_status()  # fmt: skip
        assert assets.DEFAULT_STREAM in es.indices and not es.streams
        done = run("--es-url", es.url)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "not a data stream" in done.stderr and assets.DEFAULT_STREAM in done.stderr


def test_a_mapping_change_rolls_the_stream_over(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EsStandin() as es:
        assert run("--es-url", es.url).returncode == 0
        assert len(es.streams[assets.DEFAULT_STREAM]) == 1
        again = run("--es-url", es.url)
        assert again.returncode == 0 and "rolled over" not in again.stdout
        assert len(es.streams[assets.DEFAULT_STREAM]) == 1  # nothing changed: no rollover
        wanted = assets.mappings()
        wanted["properties"]["genai_sample"]["properties"]["extra"] = {"type": "keyword"}
        monkeypatch.setattr(assets, "mappings", lambda: wanted)
        changed = run("--es-url", es.url)
        assert changed.returncode == 0, changed.stderr
        first, new = es.streams[assets.DEFAULT_STREAM]
        assert f"rolled over to {new}" in changed.stdout
        assert "extra" in es.index_mappings[new]["properties"]["genai_sample"]["properties"]
        assert "extra" not in es.index_mappings[first]["properties"]["genai_sample"]["properties"]
        assert "rolled over" not in run("--es-url", es.url).stdout  # once


def test_replicas_is_a_setting(run: Runner) -> None:
    with EsStandin() as es:
        assert run("--es-url", es.url, "--replicas", "2").returncode == 0
        body = es.resources[f"_component_template/{assets.SETTINGS_COMPONENT}"]
        assert body["template"]["settings"]["index.number_of_replicas"] == 2
        assert run("--es-url", es.url).returncode == 0
        body = es.resources[f"_component_template/{assets.SETTINGS_COMPONENT}"]
        assert body["template"]["settings"]["index.number_of_replicas"] == 0


def _item(doc_id: str) -> Item:
    raw = json.dumps({"@timestamp": "2026-01-01T00:00:00.000Z", "event": {"id": doc_id}}).encode()
    return Item(doc_id, json.loads(raw), raw)


def test_users_with_least_privilege_are_set_up_twice_without_harm(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compose: the shipper writes as a create_doc user, Grafana reads as a read-only one."""
    with EsStandin(basic_auth="elastic:s3cret") as es:
        monkeypatch.setenv("TOKENPULSE_ES_ES_PASSWORD", "s3cret")
        monkeypatch.setenv("TOKENPULSE_ES_SHIPPER_PASSWORD", "ship-pw")
        monkeypatch.setenv("TOKENPULSE_ES_READER_PASSWORD", "read-pw")
        for _ in range(2):
            done = run("--es-url", es.url, "--es-username", "elastic",
                       "--shipper-user", "tp_shipper", "--reader-user", "tp_reader")  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert "ship-pw" not in done.stdout + done.stderr
        assert set(es.users) == {"tp_shipper", "tp_reader"}
        assert es.users["tp_shipper"]["roles"] == [setup.SHIPPER_ROLE]
        assert es.users["tp_reader"]["roles"] == [setup.READER_ROLE]
        shipper, reader = es.roles[setup.SHIPPER_ROLE], es.roles[setup.READER_ROLE]
        assert shipper["cluster"] == [] and reader["cluster"] == ["monitor"]
        assert [i["names"] for i in shipper["indices"]] == [[assets.DEFAULT_STREAM]]
        assert {p for i in shipper["indices"] for p in i["privileges"]} == {
            "create_doc", "read", "maintenance"}  # fmt: skip
        assert {p for i in reader["indices"] for p in i["privileges"]} == {
            "read", "view_index_metadata"}  # fmt: skip

        # the shipper creates records and looks their ids up with its own user, nothing more
        ship = make_client(es.url, EsAuth(username="tp_shipper", password="ship-pw"))
        out = ElasticsearchOutput(ship, assets.DEFAULT_STREAM)
        assert [r.outcome for r in out.send([_item("a"), _item("b")])] == [Outcome.OK] * 2
        assert out.stored_ids(["a", "b", "c"]) == {"a", "b"}
        body = {"index_patterns": ["x-*"], "data_stream": {}}
        put = httpx.put(f"{es.url}/_index_template/x", json=body, auth=("tp_shipper", "ship-pw"))
        assert put.status_code == 403
        # Grafana's user reads the stream and its mappings, and cannot write
        read = httpx.post(f"{es.url}/{assets.PATTERN}/_search", json={},
                          auth=("tp_reader", "read-pw"))  # fmt: skip
        assert read.status_code == 200 and len(read.json()["hits"]["hits"]) == 2
        assert httpx.get(f"{es.url}/{assets.PATTERN}/_mapping",
                         auth=("tp_reader", "read-pw")).status_code == 200  # fmt: skip
        bulk = httpx.post(f"{es.url}/{assets.DEFAULT_STREAM}/_bulk", auth=("tp_reader", "read-pw"),
                          content=out.body([_item("c")]),
                          headers={"Content-Type": "application/x-ndjson"})  # fmt: skip
        assert bulk.status_code == 403 and "c" not in es.docs(assets.DEFAULT_STREAM)
        wrong = httpx.post(f"{es.url}/{assets.PATTERN}/_search", json={}, auth=("tp_reader", "x"))
        assert wrong.status_code == 401


def test_a_user_without_its_password_exits_2(run: Runner) -> None:
    done = run("--es-url", "http://127.0.0.1:9", "--shipper-user", "tp_shipper")
    assert done.returncode == 2 and "shipper_password" in done.stderr
