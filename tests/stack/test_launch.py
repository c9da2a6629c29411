"""The shared launchers: each starts its component, waits until ready, and stops it (no orphans)."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.keys import add_key
from stack.launch import (
    ExporterStartError,
    GatewayStartError,
    ModelServerStartError,
    available_versions,
    running_exporter,
    running_gateway,
    running_modelserver,
    running_process,
)
from tests.support.models import install_version


def _session_members(sid: int) -> list[int]:
    """Processes still alive in the session a launcher started (the child leads it)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry))
    return members


def _assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _session_members(pid) == []


@pytest.mark.slow
def test_modelserver_is_ready_with_an_available_version_and_stops(
    tmp_path: Path, lifecycle_export: Path
) -> None:
    model_base = tmp_path / "gen"
    install_version(lifecycle_export, model_base, 1)  # loading is judged, not generation
    with running_modelserver(model_base, enable_batching=False) as ms:
        assert available_versions(ms.rest_url, "gen") == [1]
        assert ms.model_status()["model_version_status"][0]["state"] == "AVAILABLE"
        assert ms.metrics_text().startswith("#") and ms.started_in_s > 0
        assert ms.grpc_target == f"127.0.0.1:{ms.grpc_port}" and ms.process.poll() is None
    assert ms.process.returncode is not None
    _assert_gone(ms.pid)


def test_modelserver_that_exits_raises_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(ModelServerStartError, match="exited with"):
        with running_modelserver(tmp_path, extra_args=["--no_such_flag=1"]):
            pass


def test_modelserver_needs_exactly_one_model_source(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        with running_modelserver():
            pass


def test_gateway_is_ready_on_healthz_and_stops_even_when_the_block_fails(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    key = add_key(keys, "t")
    log = tmp_path / "logs" / "gateway.log"
    with TfServingStandin() as tfs, pytest.raises(RuntimeError, match="boom"):
        with running_gateway(tfs.url, keys, log_path=log, models=["gen"]) as gw:
            req = urllib.request.Request(
                f"{gw.url}/v1/generate",
                data=json.dumps({"model": "gen", "prompt": "hi", "max_new_tokens": 2}).encode(),
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert json.loads(resp.read())["text"] == "hello world (v1)"
            assert [doc["status"] for doc in gw.access_logs()][-1:] == [200]
            raise RuntimeError("boom")
    _assert_gone(gw.pid)
    assert log.read_text() == gw.stderr() and "request" in log.read_text()


def test_gateway_with_invalid_settings_raises_with_its_log(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    add_key(keys, "t")
    with pytest.raises(GatewayStartError, match="exited with 2"):
        with running_gateway("http://127.0.0.1:9", keys, max_concurrency="many"):
            pass


def test_exporter_is_ready_when_its_page_has_the_line_asked_for() -> None:
    off = [f"--no-collector.{name}" for name in ("nvml", "tfserving", "canary")]
    with running_exporter(off, ready_line="tokenpulse_exporter_build_info") as ex:
        with urllib.request.urlopen(ex.metrics_url, timeout=5) as resp:
            assert b"tokenpulse_exporter_build_info" in resp.read()
    _assert_gone(ex.pid)


def test_exporter_that_never_shows_the_line_times_out_and_is_stopped() -> None:
    off = [f"--no-collector.{name}" for name in ("nvml", "tfserving", "canary")]
    with pytest.raises(ExporterStartError, match="not ready after"):
        with running_exporter(off, ready_line="no_such_series", start_timeout_s=3):
            pass


@pytest.mark.parametrize("existing", [False, True])
def test_a_components_log_is_private_whatever_the_umask(tmp_path: Path, existing: bool) -> None:
    """A component's log holds what it printed (the on-call receiver's: every page's text), so
    it is 0600 like the other run files, also when an earlier run left it 0644."""
    log = tmp_path / "logs" / "oncall.log"
    if existing:
        log.parent.mkdir()
        log.write_text("an earlier run\n")
        log.chmod(0o644)
    old = os.umask(0o022)
    try:
        with running_process(
            ["sh", "-c", "echo page text; exec sleep 30"],
            lambda: "page text" in log.read_text(),  # it has written to its log
            what="sh",
            log_path=log,
        ):
            pass
    finally:
        os.umask(old)
    assert log.stat().st_mode & 0o777 == 0o600
    assert log.read_text().endswith("page text\n")
