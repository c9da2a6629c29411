"""The text-proto reader for TF Serving's model config, without TensorFlow."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.modelconfig import (
    ModelConfigError,
    load_model_config,
    parse_model_config,
    parse_text_proto,
)

REFERENCE_EXAMPLE = """
# The example of REFERENCE.md A.4, with both quoting styles and a comment.
model_config_list { config {
  name: 'gen' base_path: '/models/gen' model_platform: 'tensorflow'
  model_version_policy { specific { versions: 42 versions: 43 } }
  version_labels { key: 'stable' value: 42 }  version_labels { key: "canary" value: 43 } } }
"""


def test_reads_names_base_paths_and_labels():
    [entry] = parse_model_config(REFERENCE_EXAMPLE)
    assert entry.name == "gen"
    assert entry.base_path == Path("/models/gen")
    assert entry.labels == {"stable": 42, "canary": 43}


def test_several_models_and_other_fields_ignored():
    text = """
    model_config_list: {
      config: { name: "a", base_path: "/m/a", model_version_policy: { all: {} } },
      config: < name: "b" base_path: "/m/b" model_version_policy { latest { num_versions: 2 } } >
    }
    """
    entries = parse_model_config(text)
    assert [(e.name, str(e.base_path), e.labels) for e in entries] == [
        ("a", "/m/a", {}),
        ("b", "/m/b", {}),
    ]


def test_string_escapes_and_adjacent_strings():
    msg = parse_text_proto(r"""name: "a\"b" 'c' path: 'x\ty'""")
    assert msg.one("name") == 'a"bc'
    assert msg.one("path") == "x\ty"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model_config_list { config { name: 'gen' }", "line 1: unexpected end of file"),
        ("model_config_list {\n config { name: 'gen' base_path: '/x' }\n ]", "line 3"),
        ("model_config_list { config { base_path: '/x' } }", "config entry without a name"),
        ("model_config_list { config { name: 'gen' } }", "model 'gen' has no base_path"),
        ("other_field: 1", "no model_config_list"),
        (
            "model_config_list { config { name: 'a' base_path: '/a' }"
            " config { name: 'a' base_path: '/b' } }",
            "model names must be unique",
        ),
        (
            "model_config_list { config { name: 'a' base_path: '/a'"
            " version_labels { key: 'x' } } }",
            "version_labels need a key and an int value",
        ),
        ("model_config_list {\n\n config { name: 'a' @ } }", "line 3: unexpected character '@'"),
    ],
)
def test_bad_files_get_a_clear_error(text, message):
    with pytest.raises(ModelConfigError, match=message):
        parse_model_config(text)


def test_missing_file(tmp_path):
    with pytest.raises(ModelConfigError, match="cannot read model config"):
        load_model_config(tmp_path / "nope.config")
