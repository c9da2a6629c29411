"""Our text-format reading of TF Serving's config files against protobuf's, field by field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tokenpulse.tfserving import reference
from tokenpulse.paths import SERVING_CONFIG as CONFIG_DIR
from tokenpulse.tfserving.config import (
    ConfigError,
    load,
    load_model_server_config,
    parse_batching_parameters,
    parse_model_server_config,
    parse_monitoring_config,
    validate_model_server_config,
)


@pytest.mark.parametrize("name", ["models.config", "models.container.config"])
def test_shipped_model_configs_read_as_protobuf_reads_them(name: str) -> None:
    text = (CONFIG_DIR / name).read_text()
    ours = load_model_server_config(CONFIG_DIR / name)
    assert ours == reference.model_server_config(text)
    assert [m.name for m in ours.models] == ["gen"]


def test_shipped_batching_and_monitoring_files_read_as_protobuf_reads_them() -> None:
    batching = (CONFIG_DIR / "batching_parameters.txt").read_text()
    assert parse_batching_parameters(batching) == reference.batching_parameters(batching)
    assert parse_batching_parameters(batching).max_batch_size == 32
    monitoring = (CONFIG_DIR / "monitoring.config").read_text()
    assert parse_monitoring_config(monitoring) == reference.monitoring_config(monitoring)
    assert parse_monitoring_config(monitoring).prometheus_enable


TRICKY_MODEL_CONFIGS = [
    # single quotes, as TF Serving docs and users write them; both label forms
    "model_config_list { config { name: 'gen' base_path: '/m/gen' "
    "version_labels { key: 'stable' value: 1 } version_labels { key: 'canary' value: 2 } } }",
    # angle brackets, a colon before a message, comma and semicolon separators
    'model_config_list: < config: < name: "gen", base_path: "/m"; model_platform: "tensorflow" > >',
    # escaped quotes and other C escapes, adjacent strings concatenating
    r"""model_config_list { config { name: 'g\'e\"n' base_path: "/a\\b" '/c\tx' "\101\x42" } }""",
    # comments everywhere, newlines inside messages
    "# top\nmodel_config_list { # after brace\n config {\n  name: 'gen' # trailing\n"
    "  base_path: '/m'\n }\n}\n# end",
    # version policies
    "model_config_list { config { name: 'a' base_path: '/a' "
    "model_version_policy { specific { versions: 1 versions: 2 } } } }",
    "model_config_list { config { name: 'a' base_path: '/a' "
    "model_version_policy { specific { versions: [3, 4] } } } }",
    "model_config_list { config { name: 'a' base_path: '/a' model_version_policy { all {} } } }",
    "model_config_list { config { name: 'a' base_path: '/a' model_version_policy { latest {} } } }",
    "model_config_list { config { name: 'a' base_path: '/a' "
    "model_version_policy { latest { num_versions: 0x3 } } } }",
    "model_config_list { config { name: 'a' base_path: '/a' model_version_policy {} } }",
    # repeated messages as a list, map keys given twice (the last wins)
    "model_config_list { config [ { name: 'a' base_path: '/a' }, { name: 'b' base_path: '/b' } ] }",
    "model_config_list { config { name: 'a' base_path: '/a' "
    "version_labels [ { key: 's' value: 1 }, { key: 's' value: 7 } ] } }",
    # a scalar given again over its default value
    "model_config_list { config { name: '' name: 'b' base_path: '/a' } }",
    # enum by name and by number, octal and negative integers
    "model_config_list { config { name: 'a' model_type: TENSORFLOW } }",
    "model_config_list { config { name: 'a' model_type: 2 "
    "version_labels { key: 'k' value: -010 } } }",
    # empty documents and messages, UTF-8 text
    "",
    "model_config_list {}",
    "model_config_list { config { name: 'modèle' base_path: '/données' } }",
]


@pytest.mark.parametrize("text", TRICKY_MODEL_CONFIGS)
def test_tricky_model_config_forms_match_protobuf(text: str) -> None:
    assert parse_model_server_config(text) == reference.model_server_config(text)


@pytest.mark.parametrize("text", TRICKY_MODEL_CONFIGS)
def test_the_model_servers_proto_equals_protobufs_parse(text: str) -> None:
    from tensorflow_serving.config import model_server_config_pb2

    from serving.modelserver.config_files import to_proto

    theirs = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
    assert to_proto(parse_model_server_config(text)) == theirs


REJECTED_MODEL_CONFIGS = [
    "model_config_list { config { name: 'gen' }",  # unclosed
    "model_config_list { config { name: 'gen' > }",  # mismatched bracket
    "model_config_list { config { name 'gen' } }",  # scalar without ':'
    "model_config_list { config { name: gen } }",  # unquoted string
    "model_config_list { config { name: 'gen } }",  # unterminated string
    "model_config_list { config { bogus: 1 } }",  # unknown field
    "model_config_list { config { version_labels { key: 's' value: '1' } } }",  # string for int
    "model_config_list { config { version_labels { key: 's' value: 1.5 } } }",  # float for int
    "model_config_list { config { version_labels { key: 's' value: 9223372036854775808 } } }",
    "model_config_list { config { model_version_policy { latest { num_versions: -1 } } } }",
    "model_config_list { config { model_version_policy { latest {} all {} } } }",  # oneof twice
    "model_config_list { config { model_type: PYTORCH } }",  # unknown enum name
    "model_config_list { config { name: 'a' base_path: '/a' }, , }",  # two separators
    "model_config_list { config { model_version_policy { specific { versions: [1 2] } } } }",
    "} model_config_list {}",
    "model_config_list { config { name: 'a' name: 'b' } }",  # a scalar set twice
    "model_config_list { config { name: 'a' } } model_config_list {}",  # a message set twice
]


@pytest.mark.parametrize("text", REJECTED_MODEL_CONFIGS)
def test_forms_protobuf_rejects_we_reject(text: str) -> None:
    with pytest.raises(text_format.ParseError):
        reference.model_server_config(text)
    with pytest.raises(ConfigError):
        parse_model_server_config(text)


@pytest.mark.parametrize(
    "text",
    [
        "model_config_list { config { name: 'a\\z' } }",  # C++ rejects; Python keeps the '\\'
        "model_config_list { config { name: 'caf\\u00e9' } }",  # Python would write Latin-1
        "model_config_list { config { version_labels { key: 'k' value: 1_000 } } }",
        "model_config_list { config { version_labels { key: 'k' value: 0b11 } } }",
    ],
)
def test_forms_only_python_protobuf_accepts_we_reject(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_model_server_config(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# nothing set\n",
        "max_batch_size { value: 128 }\nbatch_timeout_micros { value: 0 }\n"
        "num_batch_threads { value: 8 }\nallowed_batch_sizes: 32\nallowed_batch_sizes: 128\n"
        "pad_variable_length_inputs: true\n",
        "max_batch_size < value: 16 >, allowed_batch_sizes: [4, 16]; "
        "thread_pool_name { value: 'p' }",
        "enable_large_batch_splitting { value: true } max_execution_batch_size { value: 8 }",
        "enable_large_batch_splitting {} max_batch_size: { value: 0x20 } "
        "num_batch_threads {value:1}",
        "pad_variable_length_inputs: t",
        "pad_variable_length_inputs: 0",
    ],
)
def test_batching_parameter_forms_match_protobuf(text: str) -> None:
    assert parse_batching_parameters(text) == reference.batching_parameters(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        'prometheus_config: { enable: true, path: "/monitoring/prometheus/metrics" }',
        "prometheus_config < enable: True path: '/m' >",
        "prometheus_config { enable: false }",
        "prometheus_config { path: '' }",
    ],
)
def test_monitoring_config_forms_match_protobuf(text: str) -> None:
    assert parse_monitoring_config(text) == reference.monitoring_config(text)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("batching", "max_batch_size: 8"),  # wrapped field given as a scalar
        ("batching", "max_batch_size { value: 8 }\nmax_batch_sise { value: 1 }"),
        ("batching", "pad_variable_length_inputs: yes"),
        ("monitoring", "prometheus_config: { enable: maybe }"),
        ("monitoring", "prometheus_config: { enable: 'true' }"),
        ("monitoring", "prometheus_config { enable: true } prometheus_config {}"),
    ],
)
def test_batching_and_monitoring_forms_protobuf_rejects_we_reject(kind: str, text: str) -> None:
    theirs: Callable[[str], object] = reference.batching_parameters
    ours: Callable[[str], object] = parse_batching_parameters
    if kind == "monitoring":
        theirs, ours = reference.monitoring_config, parse_monitoring_config
    with pytest.raises(text_format.ParseError):
        theirs(text)
    with pytest.raises(ConfigError):
        ours(text)


def test_errors_give_line_and_column_and_the_file(tmp_path: Path) -> None:
    f = tmp_path / "batching.txt"
    f.write_text("max_batch_size { value: 8 }\n  num_batch_thread { value: 2 }\n")
    with pytest.raises(ConfigError) as err:
        load(f, parse_batching_parameters)
    assert (err.value.line, err.value.column) == (2, 3)
    assert str(err.value).startswith(f"{f}:2:3 : ")
    assert "num_batch_thread" in str(err.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing", parse_batching_parameters)


def test_validation_follows_tf_serving() -> None:
    one = "config { name: 'gen' base_path: '/m' }"
    checks = [
        (f"model_config_list {{ {one} {one} }}", "Illegal to list model gen multiple times"),
        ("model_config_list { config { base_path: '/m' } }", "without a name"),
        ("model_config_list { config { name: 'gen' } }", "has no base_path"),
        ("", "Only ModelConfigList is currently supported"),
        (
            "model_config_list { config { name: 'g' base_path: '/m' model_platform: 'onnx' } }",
            "no entry for platform onnx",
        ),
        (
            "model_config_list { config { name: 'g' base_path: '/m' "
            "version_labels { key: 'a-b' value: 1 } } }",
            "Invalid label name: a-b",
        ),
    ]
    for text, message in checks:
        with pytest.raises(ConfigError, match=message):
            validate_model_server_config(parse_model_server_config(text))
    with pytest.raises(ConfigError, match="allowed_batch_sizes must match max_batch_size"):
        parse_batching_parameters("max_batch_size { value: 16 } allowed_batch_sizes: 8")
    with pytest.raises(ConfigError, match="max_batch_size must be positive"):
        parse_batching_parameters("max_batch_size { value: 0 }")


# Random configs written in random (valid) spellings: protobuf and we must read the same thing.
_names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_int64 = st.integers(-(2**63), 2**63 - 1)


def _string(draw: st.DrawFn, value: str) -> str:
    quote = draw(st.sampled_from(["'", '"']))
    out = []
    for ch in value:
        if ch in (quote, "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append(draw(st.sampled_from(["\\n", "\\012", "\\x0a"])))
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return quote + "".join(out) + quote


def _int(draw: st.DrawFn, value: int) -> str:
    form = draw(st.sampled_from(["dec", "hex", "oct"]))
    sign, mag = ("-" if value < 0 else ""), abs(value)
    if form == "hex":
        return f"{sign}0x{mag:x}"
    if form == "oct" and mag:
        return f"{sign}0{mag:o}"
    return f"{sign}{mag}"


def _message(draw: st.DrawFn, name: str, body: list[str]) -> str:
    opener, closer = draw(st.sampled_from([("{", "}"), ("<", ">")]))
    colon = draw(st.sampled_from(["", ":", ": "]))
    return f"{name}{colon} {opener} {_join(draw, body)} {closer}"


def _join(draw: st.DrawFn, parts: list[str]) -> str:
    out = []
    for part in parts:
        sep = draw(st.sampled_from([" ", "\n", ", ", "; ", " # note\n"]))
        out.append(part + sep)
    return "".join(out)


@st.composite
def model_config_texts(draw: st.DrawFn) -> str:
    configs = []
    for _ in range(draw(st.integers(0, 3))):
        fields = []
        if draw(st.booleans()):
            fields.append(f"name: {_string(draw, draw(_names))}")
        if draw(st.booleans()):
            fields.append(f"base_path: {_string(draw, draw(_names))}")
        if draw(st.booleans()):
            fields.append(
                f"model_platform: {_string(draw, draw(st.sampled_from(['tensorflow', ''])))}"
            )
        for _ in range(draw(st.integers(0, 3))):
            key = f"key: {_string(draw, draw(_names))}"
            value = f"value: {_int(draw, draw(_int64))}"
            fields.append(_message(draw, "version_labels", draw(st.permutations([key, value]))))
        policy = draw(st.sampled_from(["none", "latest", "all", "specific"]))
        if policy == "latest":
            n = draw(st.integers(0, 2**32 - 1))
            inner = [f"num_versions: {_int(draw, n)}"] if draw(st.booleans()) else []
            fields.append(_message(draw, "model_version_policy", [_message(draw, "latest", inner)]))
        elif policy == "all":
            fields.append(_message(draw, "model_version_policy", [_message(draw, "all", [])]))
        elif policy == "specific":
            versions = draw(st.lists(st.integers(0, 2**40), max_size=4))
            if draw(st.booleans()):
                inner = [f"versions: [{', '.join(_int(draw, v) for v in versions)}]"]
            else:
                inner = [f"versions: {_int(draw, v)}" for v in versions]
            specific = _message(draw, "specific", inner)
            fields.append(_message(draw, "model_version_policy", [specific]))
        configs.append(_message(draw, "config", draw(st.permutations(fields))))
    if not configs and draw(st.booleans()):
        return draw(st.sampled_from(["", "# only a comment\n"]))
    return _message(draw, "model_config_list", configs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_config_texts())
def test_random_model_configs_read_as_protobuf_reads_them(text: str) -> None:
    from tensorflow_serving.config import model_server_config_pb2

    from serving.modelserver.config_files import to_proto

    ours = parse_model_server_config(text)
    assert ours == reference.model_server_config(text)
    assert to_proto(ours) == text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
