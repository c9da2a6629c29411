"""Settings from the environment never end in a traceback (issue 31 item 7): every list setting
of every command takes a plain value, a comma-separated list or a JSON list from its variable,
and a value a setting cannot read, of any type, is one error line naming the variable, exit 2.

The settings classes are found by walking the tree (every module that defines one is imported),
and the commands' models come from the real `tokenpulse` parser, so a class or a command added
later is covered without touching this file."""

from __future__ import annotations

import argparse
import enum
import importlib
import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from pydantic_settings import BaseSettings, EnvSettingsSource

from stack import cli
from tokenpulse import paths
from tokenpulse.settings_cli import SettingsError, _kind, env_name, settings_from_args


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))
    yield " ".join(path), parser


def _command_models() -> dict[type[BaseSettings], str]:
    """Every settings model a `tokenpulse` command reads, with the first command reading it."""
    found: dict[type[BaseSettings], str] = {}
    for command, parser in _parsers(cli.build_parser()):
        for model in parser.get_default("_settings_models") or ():
            found.setdefault(model, command)
    return found


MODELS = _command_models()
PACKAGES = ("tokenpulse", "serving", "exporter", "log_pipeline", "monitoring", "stack", "devtools")
# a settings class names its base: BaseSettings, or another settings class (`...Settings`)
_DEFINES = re.compile(r"^class \w+\([\w.]*Settings\b", re.M)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _every_settings_class() -> list[type[BaseSettings]]:
    """Every pydantic-settings class the tree defines: each module that defines one is imported
    (only those: the model's own modules would bring TensorFlow in), then BaseSettings's
    subclasses are walked."""
    for package in PACKAGES:
        for file in sorted((paths.ROOT / package).rglob("*.py")):
            if _DEFINES.search(file.read_text(encoding="utf-8")):
                parts = file.relative_to(paths.ROOT).with_suffix("").parts
                importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    found = {c for c in _subclasses(BaseSettings) if c.__module__.split(".")[0] in PACKAGES}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _reads_the_environment(model: type[BaseSettings]) -> bool:
    """False for a class whose sources leave the environment out on purpose (one env file)."""
    sources, _ = model._settings_init_sources(_init_kwargs={})
    return any(isinstance(source, EnvSettingsSource) for source in sources)


DEFINED = _every_settings_class()
CLASSES = [model for model in DEFINED if _reads_the_environment(model)]


def _label(model: type[BaseSettings]) -> str:
    """The command that reads the class, or the class's name when none reads it directly."""
    return MODELS.get(model) or model.__name__


def _collection(annotation: Any) -> bool:
    return typing.get_origin(_kind(annotation)) in (list, tuple, set, frozenset)


LIST_FIELDS = [
    (_label(model), model, name)
    for model in CLASSES
    for name, info in model.model_fields.items()
    if _collection(info.annotation)
]

# fields whose validators accept only some values: two they accept (any other list field gets
# generic values of its element type)
VALID_ITEMS = {
    "outputs": ("sqlite", "elasticsearch"),  # with TOKENPULSE_SHIPPER_ES_URL below
    "metrics_url": ("http://127.0.0.1:9/metrics", "http://127.0.0.1:10/metrics"),
    "count_by": ("model", "route"),
    "worker_hosts": ("127.0.0.1:2222", "127.0.0.1:2223"),  # with TOKENPULSE_MODEL_WORKER_INDEX
}
ALSO = {  # what those commands need besides
    "outputs": {"es_url": "http://127.0.0.1:9"},
    "tags": {"token_file": __file__},  # any file that exists: only its presence is checked here
    "worker_hosts": {"worker_index": "0"},
}
GENERIC_ITEMS: dict[Any, tuple[str, str]] = {
    str: ("alpha", "beta"),
    int: ("2", "4"),
    float: ("0.5", "2"),
    SecretStr: ("tp-plainvalue0123456789", "tp-secondvalue012345678"),
}


def _items(model: type[BaseSettings], name: str) -> tuple[str, str]:
    if name in VALID_ITEMS:
        return VALID_ITEMS[name]
    (item,) = typing.get_args(_kind(model.model_fields[name].annotation))[:1]
    return GENERIC_ITEMS[item]


def _plain(value: Any) -> Any:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No TOKENPULSE_* variable from the machine running the tests."""
    for var in list(os.environ):
        if var.upper().startswith("TOKENPULSE_"):
            monkeypatch.delenv(var)
    return monkeypatch


def _required(model: type[BaseSettings], env: pytest.MonkeyPatch, tmp: Path) -> None:
    """Values for the model's required fields (a file that exists, a URL, a number), so that
    the field under test decides."""
    (tmp / "required").write_text("{}\n")
    for name, info in model.model_fields.items():
        if info.is_required():
            kind = _kind(info.annotation)
            value = (
                "1"
                if kind in (int, float)
                else str(tmp / "required")
                if kind is Path
                else "http://127.0.0.1:9"
            )
            env.setenv(env_name(model, name), value)


def _read(model: type[BaseSettings], name: str, value: str, env: pytest.MonkeyPatch) -> list[Any]:
    for other, other_value in ALSO.get(name, {}).items():
        env.setenv(env_name(model, other), other_value)
    env.setenv(env_name(model, name), value)
    settings = settings_from_args(model, argparse.Namespace())
    return [_plain(v) for v in getattr(settings, name)]


def test_the_walk_finds_every_settings_class_the_commands_read() -> None:
    assert set(MODELS) <= set(CLASSES), "a command reads a class the walk does not find"
    assert len(DEFINED) - len(CLASSES) <= 1  # links' file-only reader of the Kubernetes links
    defined = {
        (file.relative_to(paths.ROOT).as_posix(), name)
        for package in PACKAGES
        for file in (paths.ROOT / package).rglob("*.py")
        for name in re.findall(r"^class (\w+)\([\w.]*Settings\b", file.read_text(), re.M)
    }
    assert len(DEFINED) == len(defined) >= 20, sorted(defined)


def test_the_commands_list_settings_are_found() -> None:
    found = {(command, name) for command, _, name in LIST_FIELDS}
    assert {("loadtest", "key"), ("gateway", "models"), ("shipper", "outputs")} <= found
    assert set(VALID_ITEMS) <= {name for _, _, name in LIST_FIELDS}  # no stale entries


@pytest.mark.parametrize(
    ("command", "model", "name"), LIST_FIELDS, ids=[f"{c}:{n}" for c, _, n in LIST_FIELDS]
)
def test_every_list_setting_takes_a_plain_value_and_a_comma_separated_list(
    command: str, model: type[BaseSettings], name: str, env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _required(model, env, tmp_path)
    first, second = _items(model, name)
    kind = typing.get_args(_kind(model.model_fields[name].annotation))[0]
    item = kind if kind in (int, float) else str

    assert _read(model, name, first, env) == [item(first)]
    assert _read(model, name, f"{first}, {second}", env) == [item(first), item(second)]
    assert _read(model, name, f'["{first}", "{second}"]', env) == [item(first), item(second)]


def _unreadable(annotation: Any) -> str | None:
    """A value no field of this type reads (None: the type reads every string)."""
    kind = _kind(annotation)
    if _collection(kind):
        return '["unclosed'
    if typing.get_origin(kind) is dict:
        return "{not json"
    if kind is bool:
        return "maybe"
    if kind in (int, float):
        return "plenty"
    if typing.get_origin(kind) is typing.Literal or (
        isinstance(kind, type) and issubclass(kind, enum.Enum)
    ):
        return "no-such-choice"
    return None


UNREADABLE = [
    (_label(model), model, name, value)
    for model in CLASSES
    for name, info in model.model_fields.items()
    if (value := _unreadable(info.annotation)) is not None
]


@pytest.mark.parametrize(
    ("command", "model", "name", "value"),
    UNREADABLE,
    ids=[f"{c}:{n}" for c, _, n, _ in UNREADABLE],
)
def test_an_unreadable_value_of_any_type_is_one_line_naming_its_variable(
    command: str,
    model: type[BaseSettings],
    name: str,
    value: str,
    env: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _required(model, env, tmp_path)  # or a missing setting could be all the message says
    var = env_name(model, name)
    env.setenv(var, value)
    with pytest.raises(SettingsError) as caught:
        settings_from_args(model, argparse.Namespace())
    message = str(caught.value)
    assert var in message and "\n" not in message, message


def _tokenpulse(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("TOKENPULSE_")}
    return subprocess.run(
        [sys.executable, "-m", "stack.cli", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("command", "var", "value"),
    [
        ("loadtest", "TOKENPULSE_LOADTEST_KEY", "tp-" + "k" * 40),
        ("loadtest", "TOKENPULSE_LOADTEST_KEY", "tp-" + "a" * 40 + ",tp-" + "b" * 40),
        ("gateway", "TOKENPULSE_GATEWAY_MODELS", "gen"),
        ("gateway", "TOKENPULSE_GATEWAY_MODELS", "gen,other"),
    ],
)
def test_the_cli_reads_plain_list_values(command: str, var: str, value: str) -> None:
    # the list reads; the command then stops at a bad number, named in one line
    bad = {"loadtest": "TOKENPULSE_LOADTEST_RATE", "gateway": "TOKENPULSE_GATEWAY_PORT"}[command]
    done = _tokenpulse(command, **{var: value, bad: "plenty"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tokenpulse {command}: error: "), done.stderr
    assert bad in done.stderr and var not in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("command", "var", "value"),
    [
        ("loadtest", "TOKENPULSE_LOADTEST_KEY", '["tp-unclosed'),
        ("loadtest", "TOKENPULSE_LOADTEST_SWEEP", "1,fast"),
        ("gateway", "TOKENPULSE_GATEWAY_MODELS", "[gen"),
        ("shipper", "TOKENPULSE_SHIPPER_OUTPUTS", "[sqlite"),
    ],
)
def test_the_cli_names_an_unreadable_variable_in_one_line(
    command: str, var: str, value: str
) -> None:
    done = _tokenpulse(command, **{var: value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tokenpulse {command}: error: "), done.stderr
    assert var in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "tp-unclosed" not in done.stderr  # a key's value is not repeated


TOKENPULSE = Path(sys.executable).with_name("tokenpulse")  # the installed console script


@pytest.mark.parametrize(
    ("args", "value", "rc", "named"),
    [
        (("loadtest", "--help"), "tp-x", 0, None),
        (("loadtest",), "tp-" + "k" * 40, 2, "TOKENPULSE_LOADTEST_RATE"),
        (("loadtest",), "tp-" + "a" * 40 + ",tp-" + "b" * 40, 2, "TOKENPULSE_LOADTEST_RATE"),
        (("loadtest",), '["tp-unclosed', 2, "TOKENPULSE_LOADTEST_KEY"),
    ],
)
def test_the_installed_command_reads_a_plain_key_and_names_an_unreadable_one(
    args: tuple[str, ...], value: str, rc: int, named: str | None
) -> None:
    # a plain key reads, so the run stops at the bad rate; an unreadable key is named itself
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("TOKENPULSE_")}
    env = {**clean, "TOKENPULSE_LOADTEST_KEY": value, "TOKENPULSE_LOADTEST_RATE": "plenty"}
    done = subprocess.run(
        [str(TOKENPULSE), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == rc, done.stderr
    assert "Traceback" not in done.stderr
    if named is None:
        assert "TOKENPULSE_LOADTEST_KEY" in done.stdout and done.stderr == ""
        return
    assert done.stderr.startswith("tokenpulse loadtest: error: "), done.stderr
    assert named in done.stderr and done.stderr.count("\n") == 1
    assert "tp-unclosed" not in done.stderr and "k" * 40 not in done.stderr
