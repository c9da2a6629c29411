"""The test stack's config, without a stack: the `test` profile, the HA option, the shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.stack import config_for_tests
from stack import components
from stack.config import FAST_POLLS, HaPorts
from stack.profiles import PROFILES


def test_ha_runs_both_pairs_on_their_own_free_ports(tmp_path: Path) -> None:
    config = config_for_tests(tmp_path, alerting=True, ha=True, group_interval="5s")
    assert config.ha is not None
    ports = [getattr(config.ha, name) for name in HaPorts.names()]
    ports += [config.ports.prometheus_port, config.ports.alertmanager_port]
    assert len(set(ports)) == len(ports)
    names = [c.name for c in components.enabled(config)]
    assert names[-4:] == ["alertmanager", "alertmanager-2", "prometheus", "prometheus-2"]
    assert config_for_tests(tmp_path, alerting=True).ha is None


def test_ha_with_the_default_group_interval_is_refused(tmp_path: Path) -> None:
    """2 s scrapes and 2 s evaluations: the pair may see a recovery 4 s apart; a 3 s group
    interval could page twice."""
    with pytest.raises(ValueError, match=r"group_interval \(3s\) must be longer"):
        config_for_tests(tmp_path, alerting=True, ha=True)


def test_a_test_stack_runs_the_test_profile_without_alerting_unless_asked(tmp_path: Path) -> None:
    config = config_for_tests(tmp_path)
    for name, value in PROFILES["test"].items():
        assert getattr(config, name) == value, name
    assert config.rules == "compressed" and config.polls == FAST_POLLS
    assert not config.alerting and config.gpu_backend == "fake"
    assert "oncall" not in [c.name for c in components.enabled(config)]
    assert config_for_tests(tmp_path, alerting=True, canary_interval_s=2.0).canary_interval_s == 2.0


def test_replicas_each_get_free_ports_of_their_own(tmp_path: Path) -> None:
    config = config_for_tests(tmp_path, model_server_replicas=3)
    assert config.model_server_replicas == 3
    ports = [p for i in range(3) for p in config.modelserver_ports(i)]
    assert len(set(ports)) == 6
    names = [c.name for c in components.enabled(config)]
    assert names[:3] == ["modelserver-0", "modelserver-1", "modelserver-2"]
