"""The models the exporter watches, from TF Serving's model config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.tfserving.models import ModelEntry, load_model_entries
from tokenpulse.tfserving.errors import ConfigError

DOCUMENTED_FORMS = """
# Both quoting styles, angle brackets and a comment: all accepted by TF Serving.
model_config_list { config <
  name: 'gen' base_path: '/models/gen' model_platform: 'tensorflow'
  model_version_policy { specific { versions: 42 versions: 43 versions: 44 } }
  version_labels { key: 'stable' value: 42 }  version_labels { key: "canary" value: 43 } > }
"""


def test_reads_names_base_paths_labels_and_configured_versions(tmp_path: Path) -> None:
    cfg = tmp_path / "models.config"
    cfg.write_text(DOCUMENTED_FORMS)
    [entry] = load_model_entries(cfg)
    assert entry == ModelEntry(
        "gen", Path("/models/gen"), {"stable": 42, "canary": 43}, (42, 43, 44)
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model_config_list { config { name: 'gen' }", ":1:43 : unexpected end of file"),
        ("model_config_list {\n config { name: 'gen' base_path: '/x' }\n ]", ":3:2 : "),
        ("model_config_list { config { base_path: '/x' } }", "model config without a name"),
        ("model_config_list { config { name: 'gen' } }", "model gen has no base_path"),
        ("", "Only ModelConfigList is currently supported"),
        (
            "model_config_list { config { name: 'a' base_path: '/a' }"
            " config { name: 'a' base_path: '/b' } }",
            "Illegal to list model a multiple times",
        ),
        ("model_config_list {\n\n config { name: 'a' @ } }", ":3:21 : unexpected character '@'"),
    ],
)
def test_bad_files_get_a_clear_error_naming_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    cfg = tmp_path / "models.config"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        load_model_entries(cfg)
    assert str(err.value).startswith(str(cfg))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_model_entries(tmp_path / "nope.config")
