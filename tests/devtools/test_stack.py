"""The test stack's options as a component-table config, without a stack: the HA option."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.stack import StackOptions, config_for_tests
from stack import components
from stack.config import HaPorts


def test_ha_runs_both_pairs_on_their_own_free_ports(tmp_path: Path) -> None:
    config = config_for_tests(tmp_path, StackOptions(alerting=True, ha=True, group_interval="5s"))
    assert config.ha is not None
    ports = [getattr(config.ha, name) for name in HaPorts.names()]
    ports += [config.ports.prometheus_port, config.ports.alertmanager_port]
    assert len(set(ports)) == len(ports)
    names = [c.name for c in components.enabled(config)]
    assert names[-4:] == ["alertmanager", "alertmanager-2", "prometheus", "prometheus-2"]
    assert config_for_tests(tmp_path, StackOptions(alerting=True)).ha is None


def test_ha_with_the_default_group_interval_is_refused(tmp_path: Path) -> None:
    """2 s scrapes and 1 s evaluations: the pair may see a recovery 3 s apart; a 3 s group
    interval could page twice."""
    with pytest.raises(ValueError, match=r"group_interval \(3s\) must be longer"):
        config_for_tests(tmp_path, StackOptions(alerting=True, ha=True))
