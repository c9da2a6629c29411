"""The gateway, the exporter and the model server read the same models.config the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.tfserving.models import load_model_entries
from serving.gateway.routing import ModelConfigError, parse_version_labels
from serving.modelserver.config_files import ConfigFileError, parse_model_server_config
from tokenpulse.tfserving.errors import ConfigError

ACCEPTED = [
    # the forms the gateway's and the exporter's old readers disagreed on
    "model_config_list < config < name: 'gen' base_path: '/m' "
    "version_labels < key: 'stable' value: 1 > > >",
    r"""model_config_list { config { name: "g\"en" base_path: '/m' """
    r"""version_labels { key: 'stable' value: 2 } } }""",
    "model_config_list: { config: { name: 'gen', base_path: '/m'; "
    "version_labels [ { key: 'canary' value: 3 }, { key: 'stable' value: 1 } ] } }",
]
REJECTED = [
    "model_config_list { config { name: 'gen' base_path: '/m' } config { name: 'gen' } }",
    "model_config_list { config { name: 'gen' base_path: '/m' bogus: 1 } }",
    "model_config_list { config { name: 'gen' base_path: '/m' "
    "version_labels { key: 'bad-label' value: 1 } } }",
]


def _model_server_labels(path: Path) -> dict[str, dict[str, int]]:
    proto = parse_model_server_config(path)
    return {m.name: dict(m.version_labels) for m in proto.model_config_list.config}


@pytest.mark.parametrize("text", ACCEPTED)
def test_all_three_read_the_same_labels(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "models.config"
    cfg.write_text(text)
    gateway = parse_version_labels(text)
    exporter = {e.name: e.labels for e in load_model_entries(cfg)}
    assert gateway == exporter == _model_server_labels(cfg)
    assert all(gateway.values())


@pytest.mark.parametrize("text", REJECTED)
def test_all_three_refuse_the_same_files(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "models.config"
    cfg.write_text(text)
    with pytest.raises(ModelConfigError):
        parse_version_labels(text)
    with pytest.raises(ConfigError):
        load_model_entries(cfg)
    with pytest.raises(ConfigFileError):
        parse_model_server_config(cfg)
