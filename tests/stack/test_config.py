"""StackConfig as stack.json holds it: every value resolved, nothing secret, read back equal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.stack import config_for_tests
from stack.config import StackConfig
from stack.up import plan
from stack.up.state import StackState, read_state, write_state
from tests.support.up import up_config, up_settings


def test_a_config_reads_back_equal_from_json(tmp_path: Path) -> None:
    config = config_for_tests(
        tmp_path, alerting=True, ha=True, group_interval="5s", model_server_replicas=2,
        extra_flags={"alertmanager": ("--cluster.gossip-interval=50ms",)},
        custom_rules=(tmp_path / "fires.rules.yml",),
    )  # fmt: skip
    assert StackConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


@pytest.mark.parametrize("nvml", [True, False])
def test_stack_json_records_the_resolved_gpu_backend_and_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nvml: bool
) -> None:
    """`auto` was recorded as given, so a drill could not tell which GPUs the exporter ran."""
    monkeypatch.setattr(plan, "nvml_works", lambda: nvml)
    s = up_settings(tmp_path, es_url="http://127.0.0.1:9200", es_api_key="s3cret")
    s.run_dir.mkdir(parents=True)
    path = write_state(StackState(up_config(s), 4242, {"gateway": 1}))
    assert "s3cret" not in path.read_text() and path.stat().st_mode & 0o777 == 0o600
    doc = json.loads(path.read_text())
    assert doc["config"]["gpu_backend"] == ("real" if nvml else "off")
    assert doc["config"]["rules"] == "normal" and doc["config"]["fast_polls"] is False
    config = StackConfig.from_json(doc["config"])
    assert config.es_api_key == "" and config.es_url == "http://127.0.0.1:9200"
    assert config == up_config(s).__class__(**{**vars(up_config(s)), "es_api_key": ""})


def test_a_stack_json_of_another_shape_is_no_running_stack(tmp_path: Path) -> None:
    from stack.up.state import NoRunningStack

    (tmp_path / "stack.json").write_text(json.dumps({"up_pid": 1, "pids": {}, "ports": {}}))
    with pytest.raises(NoRunningStack, match="is not a stack state"):
        read_state(tmp_path)
    doc = {"up_pid": 1, "pids": {}, "config": {"run_dir": "x", "rules": "fast"}}
    (tmp_path / "stack.json").write_text(json.dumps(doc))
    with pytest.raises(NoRunningStack, match="unknown rule set 'fast'"):
        read_state(tmp_path)
