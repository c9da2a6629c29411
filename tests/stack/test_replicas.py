"""`--model-server-replicas N`: N model-server rows, their ports checked, all behind the gateway,
each scraped with its `replica` label; one replica keeps today's names and files."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from stack import components
from stack.up import banner as up_banner
from stack.up.ports import PortError, check_ports
from stack.up.settings import UpSettings
from tests.support.up import up_config, up_settings


def test_replicas_after_the_first_listen_two_ports_up_each(tmp_path: Path) -> None:
    s = UpSettings(model_server_replicas=3, run_dir=tmp_path / "run", models_dir=tmp_path / "m")
    config = up_config(s)
    assert config.model_server_replicas == 3
    assert [config.modelserver_ports(i) for i in range(3)] == [
        (8501, 8500),
        (8503, 8502),
        (8505, 8504),
    ]
    names = [c.name for c in components.enabled(config)]
    assert names[:4] == ["modelserver-0", "modelserver-1", "modelserver-2", "gateway"]


def test_one_replica_keeps_the_modelserver_row_as_it_was(tmp_path: Path) -> None:
    config = up_config(up_settings(tmp_path))
    assert config.replica_ports == ()
    assert [c.name for c in components.enabled(config)] == components.names()


def test_a_taken_replica_port_is_named_with_the_settings_that_chose_it(tmp_path: Path) -> None:
    s = up_settings(tmp_path, model_server_replicas=2)
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", s.rest_port + 2))
        except OSError:
            pytest.skip("that port is in use already")
        taken.listen()
        with pytest.raises(PortError) as err:
            check_ports(s)
    assert f"port {s.rest_port + 2} on 127.0.0.1 is already in use" in str(err.value)
    assert "rest_port of model-server replica 1" in str(err.value)
    assert "--rest-port / TOKENPULSE_UP_REST_PORT + 2" in str(err.value)
    assert "--model-server-replicas" in str(err.value)


def test_a_replica_port_past_the_last_one_is_named_not_a_traceback(tmp_path: Path) -> None:
    s = up_settings(tmp_path, model_server_replicas=4, rest_port=65531, grpc_port=65530)
    with pytest.raises(PortError) as err:
        check_ports(s)
    assert str(err.value).startswith("port 65537 is past 65535; it is the rest_port of "
                                      "model-server replica 3")  # fmt: skip


@pytest.mark.parametrize("held", [False, True], ids=["free", "held"])
def test_a_replica_port_on_another_setting_is_an_error(tmp_path: Path, held: bool) -> None:
    """Given twice is named first, even where that port is in use too (CI r97: another test's
    process held it, and the in-use error hid the setting clash)."""
    s = up_settings(tmp_path, model_server_replicas=2)
    s = s.model_copy(update={"gateway_port": s.grpc_port + 2})
    with contextlib.ExitStack() as stack:
        if held:
            taken = stack.enter_context(socket.socket())
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                taken.bind(("127.0.0.1", s.gateway_port))
            except OSError:
                pytest.skip("that port is in use already")
            taken.listen()
        with pytest.raises(
            PortError, match="both gateway_port .* and grpc_port of model-server replica 1"
        ):
            check_ports(s)


def test_every_replica_is_behind_the_gateway_and_scraped_with_its_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = up_settings(tmp_path, model_server_replicas=2)
    s.run_dir.mkdir(parents=True)
    config = up_config(s)
    seen: dict[str, Any] = {}

    def fake_gateway(upstream_url: str, *args: object, **kwargs: object) -> Any:
        seen["upstream_url"] = upstream_url
        return contextlib.nullcontext()

    monkeypatch.setattr(components, "running_gateway", fake_gateway)
    monkeypatch.setattr(components, "_process", lambda *a, **k: contextlib.nullcontext())
    components.by_name("gateway").start(config)
    components.by_name("prometheus").start(config)
    assert (
        seen["upstream_url"] == f"http://127.0.0.1:{s.rest_port},http://127.0.0.1:{s.rest_port + 2}"
    )
    jobs = {
        j["job_name"]: j["static_configs"]
        for j in yaml.safe_load(s.path("prometheus.yml").read_text())["scrape_configs"]
        if "static_configs" in j  # not the training runs' file_sd job
    }
    assert jobs["tfserving"] == [
        {"targets": [f"127.0.0.1:{s.rest_port}"], "labels": {"replica": "0"}},
        {"targets": [f"127.0.0.1:{s.rest_port + 2}"], "labels": {"replica": "1"}},
    ]
    # the exporter watches replica 0, as its sidecar would
    assert jobs["tokenpulse-exporter"][0]["labels"] == {"replica": "0"}
    assert "labels" not in jobs["tokenpulse-gateway"][0]


def test_one_replica_scrapes_without_a_replica_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = up_settings(tmp_path)
    s.run_dir.mkdir(parents=True)
    monkeypatch.setattr(components, "_process", lambda *a, **k: contextlib.nullcontext())
    components.by_name("prometheus").start(up_config(s))
    doc = yaml.safe_load(s.path("prometheus.yml").read_text())
    # no target carries the label, and nothing relabels one in (the rule paths under the run
    # directory may well contain the word: this test's own name does)
    for job in doc["scrape_configs"]:
        for group in job.get("static_configs", []):
            assert "replica" not in group.get("labels", {}), job["job_name"]
        for relabel in job.get("relabel_configs", []) + job.get("metric_relabel_configs", []):
            assert relabel.get("target_label") != "replica", job["job_name"]


def test_banner_lists_each_replica_and_the_replica_drill(tmp_path: Path) -> None:
    s = up_settings(tmp_path, model_server_replicas=2)
    config = up_config(s)
    pids = {c.name: 1000 + i for i, c in enumerate(components.enabled(config))}
    text = up_banner.banner(s, config, "tp-demo", pids)
    for c in components.enabled(config):
        assert f"  {c.name} " in text and c.url(config) in text and f"pid {pids[c.name]}" in text
    assert "logs/modelserver-1.log" in text
    assert f"kill {pids['modelserver-1']} (modelserver-1)" in text
    assert "exporter watches replica 0" in text
