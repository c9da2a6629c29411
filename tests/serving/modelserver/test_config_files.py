"""TF Serving's text config files: parsing, defaults, and errors that name the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.modelserver.config_files import (
    ConfigFileError,
    parse_batching_parameters,
    parse_model_server_config,
    parse_monitoring_config,
)
from tokenpulse.paths import SERVING_CONFIG as CONFIG_DIR


def test_shipped_config_files_parse() -> None:
    params = parse_batching_parameters(CONFIG_DIR / "batching_parameters.txt")
    assert params.max_batch_size == 32
    monitoring = parse_monitoring_config(CONFIG_DIR / "monitoring.config")
    assert monitoring.prometheus_enable
    assert monitoring.prometheus_path == "/monitoring/prometheus/metrics"
    config = parse_model_server_config(CONFIG_DIR / "models.config")
    assert [c.name for c in config.model_config_list.config] == ["gen"]


def test_batching_defaults_match_tf_serving(tmp_path: Path) -> None:
    empty = tmp_path / "b.txt"
    empty.write_text("# nothing set\n")
    p = parse_batching_parameters(empty)
    assert (p.max_batch_size, p.batch_timeout_micros, p.max_enqueued_batches) == (1000, 0, 10)
    assert p.allowed_batch_sizes == () and not p.pad_variable_length_inputs
    assert parse_batching_parameters(None).thread_pool_name == "model_server_batch_threads"


def test_wrapped_and_repeated_fields(tmp_path: Path) -> None:
    f = tmp_path / "b.txt"
    f.write_text(
        "max_batch_size { value: 128 }\nbatch_timeout_micros { value: 0 }\n"
        "num_batch_threads { value: 8 }\nallowed_batch_sizes: 32\nallowed_batch_sizes: 128\n"
        "pad_variable_length_inputs: true\n"
    )
    p = parse_batching_parameters(f)
    assert p.allowed_batch_sizes == (32, 128) and p.num_batch_threads == 8
    assert p.pad_variable_length_inputs


@pytest.mark.parametrize(
    ("parse", "text", "needle"),
    [
        (
            parse_batching_parameters,
            "max_batch_size { value: 8 }\nmax_batch_sise { value: 1 }\n",
            ":2:1 : ",
        ),
        (parse_batching_parameters, "max_batch_size: 8\n", ":1:"),
        (parse_monitoring_config, "prometheus_config: { enable: maybe }\n", ":1:"),
        (
            parse_model_server_config,
            "model_config_list {\n  config { name: 'gen' bogus: 1 }\n}\n",
            ":2:",
        ),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, parse, text: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(ConfigFileError) as err:
        parse(f)
    assert str(err.value).startswith(f"{f}:")
    assert needle in str(err.value)


def test_allowed_batch_sizes_must_end_at_max_batch_size(tmp_path: Path) -> None:
    f = tmp_path / "b.txt"
    f.write_text("max_batch_size { value: 16 }\nallowed_batch_sizes: 4\nallowed_batch_sizes: 8\n")
    with pytest.raises(ConfigFileError, match="Last entry in allowed_batch_sizes must match"):
        parse_batching_parameters(f)


def test_model_names_must_be_unique(tmp_path: Path) -> None:
    f = tmp_path / "models.config"
    one = "config { name: 'gen' base_path: '/m' model_platform: 'tensorflow' }"
    f.write_text(f"model_config_list {{ {one} {one} }}\n")
    with pytest.raises(ConfigFileError, match="Illegal to list model gen multiple times"):
        parse_model_server_config(f)
