"""Keys file: only hashes stored, constant-time lookup, 401 vs 403 over HTTP, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.keys import KeysFileError, KeyStore, add_key, hash_key, load_keys
from serving.gateway.settings import GatewaySettings
from tests.serving.gateway.helpers import auth
from tests.support.gateway import running_gateway


def test_file_stores_only_the_hash(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    key = add_key(path, "demo", models=["gen"], tokens_per_minute=100)
    text = path.read_text()
    assert key not in text
    assert hash_key(key) in text
    (record,) = load_keys(path)
    assert (record.id, record.models, record.tokens_per_minute) == ("demo", ("gen",), 100.0)
    assert path.stat().st_mode & 0o077 == 0


def test_lookup_finds_only_the_right_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    first, second = add_key(path, "a"), add_key(path, "b")
    store = KeyStore.from_file(path)
    assert store.lookup(first).id == "a"  # type: ignore[union-attr]
    assert store.lookup(second).id == "b"  # type: ignore[union-attr]
    assert store.lookup(first[:-1]) is None
    assert store.lookup("") is None


def test_duplicate_id_refused_unless_replaced(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    old = add_key(path, "demo")
    with pytest.raises(KeysFileError, match="already exists"):
        add_key(path, "demo")
    new = add_key(path, "demo", replace=True)
    store = KeyStore.from_file(path)
    assert store.lookup(old) is None and store.lookup(new) is not None


@pytest.mark.parametrize(
    "doc",
    [
        "not json",
        json.dumps({"nokeys": []}),
        json.dumps({"keys": [{"id": "x", "sha256": "abc"}]}),
        json.dumps({"keys": [{"id": "x", "sha256": "g" * 64}]}),
        json.dumps({"keys": [{"id": "x", "sha256": "a" * 64, "tokens_per_minute": -1}]}),
        json.dumps({"keys": [{"id": "x", "sha256": "a" * 64}, {"id": "x", "sha256": "b" * 64}]}),
    ],
)
def test_bad_keys_files_are_refused(tmp_path: Path, doc: str) -> None:
    path = tmp_path / "keys.json"
    path.write_text(doc)
    with pytest.raises(KeysFileError):
        load_keys(path)


def test_cli_prints_the_key_once_and_stores_its_hash(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    cmd = [sys.executable, "-m", "stack.cli", "gateway", "keys", "add"]
    done = subprocess.run(
        [*cmd, "--id", "demo", "--file", str(path)], capture_output=True, text=True, check=True
    )
    key = done.stdout.strip()
    assert key.startswith("tp-") and len(done.stdout.splitlines()) == 1
    assert KeyStore.from_file(path).lookup(key) is not None
    again = subprocess.run(
        [*cmd, "--id", "demo", "--file", str(path)], capture_output=True, text=True
    )
    assert again.returncode == 2 and "already exists" in again.stderr


def test_401_and_403_over_http(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    body = {"prompt": "hi", "max_new_tokens": 2}
    with running_gateway(standin.url, keys_file) as gw:
        url = f"{gw.url}/v1/generate"
        for headers in ({}, {"Authorization": "Basic abc"}, auth("tp-unknown")):
            resp = httpx.post(url, json=body, headers=headers)
            assert resp.status_code == 401, resp.text
            assert resp.json()["error"]["code"] == "invalid_api_key"
            assert resp.headers["WWW-Authenticate"] == "Bearer"
        resp = httpx.post(url, json=body, headers=auth(keys["other"]))
        assert resp.status_code == 403
        assert resp.json()["error"]["code"] == "model_not_allowed"
        resp = httpx.post(url, json=body, headers=auth(keys["demo"]))
        assert resp.status_code == 200
        logs = gw.access_logs()
    assert [entry["status"] for entry in logs] == [401, 401, 401, 403, 200]
    assert logs[-1]["key_id"] == "demo"
    log_text = json.dumps(logs)
    assert all(key not in log_text for key in keys.values())


def test_keys_added_while_running_are_picked_up(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    body = {"prompt": "hi", "max_new_tokens": 2}
    with running_gateway(standin.url, keys_file, status_poll_interval_s=0.1) as gw:
        url = f"{gw.url}/v1/generate"
        new = add_key(keys_file, "late")
        for _ in range(100):  # the poller re-reads the file within a few intervals
            if httpx.post(url, json=body, headers=auth(new)).status_code == 200:
                break
            time.sleep(0.05)
        assert httpx.post(url, json=body, headers=auth(new)).status_code == 200
        keys_file.write_text("{broken")  # a bad edit keeps the loaded keys
        for _ in range(100):
            if "cannot read keys file" in gw.stderr():
                break
            time.sleep(0.05)
        assert httpx.post(url, json=body, headers=auth(keys["demo"])).status_code == 200
        assert "cannot read keys file" in gw.stderr()


def test_a_removed_key_stops_working_without_waiting_for_the_status_poll(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    body = {"prompt": "hi", "max_new_tokens": 2}
    # the status poll never comes round during the test: only the keys watcher can notice
    with running_gateway(standin.url, keys_file, status_poll_interval_s=600) as gw:
        url = f"{gw.url}/v1/generate"
        assert httpx.post(url, json=body, headers=auth(keys["limited"])).status_code == 200
        doc = json.loads(keys_file.read_text())
        doc["keys"] = [k for k in doc["keys"] if k["id"] != "limited"]
        keys_file.write_text(json.dumps(doc))
        statuses = []
        for _ in range(100):
            statuses.append(httpx.post(url, json=body, headers=auth(keys["limited"])).status_code)
            if statuses[-1] == 401:
                break
            time.sleep(0.05)
        assert statuses[-1] == 401
        assert httpx.post(url, json=body, headers=auth(keys["demo"])).status_code == 200


def test_keys_check_interval_cannot_exceed_one_second(keys_file: Path) -> None:
    keys_file.write_text('{"keys": []}')
    GatewaySettings(keys_file=keys_file, keys_poll_interval_s=1.0)
    with pytest.raises(ValidationError, match="keys_poll_interval_s"):
        GatewaySettings(keys_file=keys_file, keys_poll_interval_s=5.0)
