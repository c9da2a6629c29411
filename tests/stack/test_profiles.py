"""Named profiles: one set of values that `tokenpulse up --profile` and the test stack both use."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.stack import config_for_tests
from stack import components
from stack.config import FAST_POLLS, StackConfig
from stack.profiles import PROFILES, profile
from stack.up.settings import UpSettings
from tests.support.up import up_config, up_settings


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_value_is_a_setting_of_up_and_a_field_of_the_config(
    tmp_path: Path, name: str
) -> None:
    config_fields = {f.name for f in dataclasses.fields(StackConfig)}
    assert set(PROFILES[name]) <= config_fields & set(UpSettings.model_fields)
    s = up_settings(tmp_path, profile=name)  # every value passes up's own checks
    config = StackConfig(run_dir=tmp_path, **PROFILES[name])
    for field, value in PROFILES[name].items():
        assert getattr(s, field) == value == getattr(config, field), field


def test_up_profile_drill_is_the_drill_stack_and_a_flag_still_wins(tmp_path: Path) -> None:
    s = up_settings(tmp_path, profile="drill", group_interval="4s")
    assert s.rules == "compressed" and s.fast_polls and s.gpu_backend == "fake"
    assert (s.fault_proxy_port, s.spool_cap_bytes, s.restart_delay_s) == (8511, 32768, 20.0)
    assert s.group_interval == "4s"  # given: not the profile's 1s
    config = up_config(s)
    assert config.polls == FAST_POLLS and config.rule_files[0].parent.name == "compressed"
    assert "faultproxy" in [c.name for c in components.enabled(config)]
    assert up_config(up_settings(tmp_path)).polls != FAST_POLLS  # the default: no fast polls


def test_a_profile_from_the_environment_loses_to_a_variable_that_sets_a_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENPULSE_UP_PROFILE", "test")
    monkeypatch.setenv("TOKENPULSE_UP_GROUP_WAIT", "7s")
    s = UpSettings()
    assert (s.profile, s.rules, s.group_wait) == ("test", "compressed", "7s")
    assert s.repeat_interval == PROFILES["test"]["repeat_interval"]


def test_the_test_stack_and_up_profile_test_run_the_same_stack(tmp_path: Path) -> None:
    """Fast polls were written twice and differed (the test stack's shipper kept the 30 s backoff
    cap, its model server the 30 s label poll); now both read stack.config.FAST_POLLS."""
    ups = up_config(up_settings(tmp_path, profile="test"))
    ours = config_for_tests(ups.run_dir)
    for field in PROFILES["test"]:
        assert getattr(ours, field) == getattr(ups, field), field
    assert ours.polls == ups.polls == FAST_POLLS
    assert components.exporter_args(ours)[-3:] == components.exporter_args(ups)[-3:]


def test_fast_polls_reach_every_polling_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: dict[str, dict] = {}
    monkeypatch.setattr(components, "running_modelserver", lambda **kw: started.update(ms=kw))
    monkeypatch.setattr(components, "running_gateway", lambda *a, **kw: started.update(gw=kw))
    monkeypatch.setattr(
        components, "_process", lambda c, name, argv, url, env=None: started.update({name: argv})
    )
    config = config_for_tests(tmp_path)
    for name in ("modelserver", "gateway", "shipper"):
        components.by_name(name).start(config)
    assert started["ms"]["file_system_poll_wait_seconds"] == FAST_POLLS.modelserver_versions_s
    assert "--model_config_file_poll_wait_seconds=1" in started["ms"]["extra_args"]
    assert started["gw"]["status_poll_interval_s"] == FAST_POLLS.gateway_status_s
    assert {"--poll-interval-s=0.5", "--backoff-max-s=2"} <= set(started["shipper"])
    assert "--tfserving.poll-interval=1" in components.exporter_args(config)
    slow = dataclasses.replace(config, fast_polls=False)
    components.by_name("modelserver").start(slow)
    assert "--model_config_file_poll_wait_seconds=30" in started["ms"]["extra_args"]
    assert not any("poll-interval" in a for a in components.exporter_args(slow))


def test_an_unknown_profile_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "stack.cli", "up", "--profile=fast"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("tokenpulse up: error:") and "drill" in done.stderr
    assert "Traceback" not in done.stderr
    with pytest.raises(ValueError, match="known: default, drill, test"):
        profile("fast")
