"""Turn a pydantic-settings model into argparse flags: one home for every option.

Every field becomes a flag whose `--help` shows the field's description, its default and its
environment variable (`<env_prefix><FIELD>`). A flag that is not given never reaches the settings,
so the environment fills it; a flag that is given beats the environment. Values reach pydantic as
the strings typed, so a bad value gets the same one-line error as a bad environment variable.
A list, tuple or set field takes from its environment variable one value (`tp-abc`), several
separated by commas (`a,b`) or a JSON list (`["a", "b"]`); a value that none of these reads, like
any invalid value, is one error line naming the variable, never a traceback.

    from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

    def add_arguments(parser):
        add_settings_arguments(parser, MySettings, style=KEBAB)

    def main(args):
        settings = settings_from_args(MySettings, args)  # raises SettingsError
        return run(settings)

`stack.cli.main` prints a `SettingsError` as `<prog>: error: <message>` and exits 2.
Styles: `KEBAB` (`--max-queue`, `--access-log/--no-access-log`), `TF` (TF Serving's
`--rest_api_port`, booleans as `--flag`, `--flag=true|false|1|0`) and `dotted(names)` for the
exporter's node_exporter names (`--web.listen-address`, `--flag/--no-flag` for booleans).
"""

from __future__ import annotations

import argparse
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource
from pydantic_settings import SettingsError as SourceError


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the one error format: `<prog>: error: <message>` on one line, exit 2."""

    def error(self, message: str) -> typing.NoReturn:
        """Report a command-line error without the usage block."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class SettingsError(Exception):
    """Invalid settings from flags or environment; the message is one line for the user."""


@dataclass(frozen=True)
class FlagStyle:
    """How field names become flags and how booleans are spelled."""

    flag: Callable[[str], str]
    tf_bools: bool = False
    names: Mapping[str, str] = field(default_factory=dict)

    def flag_for(self, name: str) -> str:
        """The flag of one field (an explicit name wins over the naming rule)."""
        return self.names.get(name) or self.flag(name)


KEBAB = FlagStyle(flag=lambda name: "--" + name.replace("_", "-"))
TF = FlagStyle(flag=lambda name: "--" + name, tf_bools=True)


def dotted(names: Mapping[str, str]) -> FlagStyle:
    """node_exporter-style flags: an explicit flag per field, kebab-case for any other field."""
    return FlagStyle(flag=KEBAB.flag, names=dict(names))


def _kind(annotation: Any) -> Any:
    """The annotation without `| None`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (types.UnionType, typing.Union) and len(args) == 1:
        return args[0]
    return annotation


def _is_collection(annotation: Any) -> bool:
    """A list, tuple, set or frozenset (or one of them `| None`)."""
    return typing.get_origin(_kind(annotation)) in (list, tuple, set, frozenset)


class EnvValueError(ValueError):
    """An environment variable whose value its field cannot read (names the variable)."""


class _PlainLists:
    """What every command's env sources decode differently from pydantic-settings: a list takes
    a plain or comma-separated value (pydantic-settings wants JSON for it, and a traceback
    follows `TOKENPULSE_LOADTEST_KEY=tp-...`); JSON that does not parse names its variable."""

    env_prefix: str

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        """A list field's plain value split on commas; anything else as pydantic-settings does."""
        if isinstance(value, str) and _is_collection(field.annotation):
            if not value.lstrip().startswith("["):
                return [part.strip() for part in value.split(",") if part.strip()]
        try:
            return super().decode_complex_value(field_name, field, value)  # type: ignore[misc]
        except ValueError as exc:
            env = f"{self.env_prefix}{field_name}".upper()
            shape = (
                "a value, a comma-separated list or a JSON list"
                if _is_collection(field.annotation)
                else "JSON"
            )
            # the value is not repeated: it may be a key
            raise EnvValueError(f"env {env}: expected {shape} ({exc})") from exc


class _Env(_PlainLists, EnvSettingsSource):
    """The environment, lists read as `_PlainLists` says."""


class _DotEnv(_PlainLists, DotEnvSettingsSource):
    """An env file, lists read as `_PlainLists` says."""


_READERS: dict[type, type] = {EnvSettingsSource: _Env, DotEnvSettingsSource: _DotEnv}


def _build(model: type[BaseSettings], values: dict[str, Any]) -> Any:
    """`model(**values)` with the model's own sources (its `settings_customise_sources` too),
    its env sources reading lists as `_PlainLists` does."""
    sources, init_kwargs = model._settings_init_sources(_init_kwargs=values)
    return model(_build_sources=(tuple(map(_plain_lists, sources)), init_kwargs))


def _plain_lists(source: Any) -> Any:
    """An env source as a `_PlainLists` one with the same options and state; others as given."""
    reader = _READERS.get(type(source))
    if reader is None:
        return source
    copy: Any = object.__new__(reader)
    copy.__dict__.update(vars(source))
    return copy


_SOURCE_FIELD = re.compile(r'field "([^"]+)"')


def _metavar(name: str, kind: Any) -> str:
    if typing.get_origin(kind) is typing.Literal:
        return "{" + ",".join(str(v) for v in typing.get_args(kind)) + "}"
    if kind in (int, float):
        return "N"
    return name.rsplit("_", 1)[-1].upper()


def _default_text(info: Any) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value) or "none"
    return "none" if value is None or value == "" else str(value)


def env_name(model: type[BaseSettings], name: str) -> str:
    """The environment variable of one field."""
    return f"{model.model_config.get('env_prefix', '')}{name}".upper()


def add_settings_arguments(
    parser: argparse.ArgumentParser,
    model: type[BaseSettings],
    *,
    style: FlagStyle = KEBAB,
    exclude: Iterable[str] = (),
    positional: Iterable[str] = (),
) -> None:
    """One flag per field of `model` (dest = field name); absent flags stay out of the namespace."""
    skip, positional = set(exclude), tuple(positional)
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        description = (info.description or name.replace("_", " ")).replace("%", "%%")
        help_text = f"{description} (default: {_default_text(info)}; env {env_name(model, name)})"
        if name in positional:
            parser.add_argument(name, help=help_text.replace("default: required; ", ""))
            continue
        kind, extra = _kind(info.annotation), dict[str, Any]()
        if kind is bool and style.tf_bools:
            # `--flag` alone means true; pydantic judges `--flag=VALUE` like the env var
            extra = {"nargs": "?", "const": "true", "metavar": "true|false"}
        elif kind is bool:
            extra = {"action": argparse.BooleanOptionalAction}
        elif typing.get_origin(kind) in (list, tuple, set):
            extra = {"nargs": "+", "metavar": _metavar(name, typing.get_args(kind)[0])}
        else:
            extra = {"metavar": _metavar(name, kind)}
        flag = style.flag_for(name)
        parser.add_argument(flag, dest=name, default=argparse.SUPPRESS, help=help_text, **extra)
    models = (*(parser.get_default("_settings_models") or ()), model)  # what this command reads
    parser.set_defaults(_settings_prog=parser.prog, _settings_style=style, _settings_models=models)


def settings_from_args(
    model: type[BaseSettings],
    args: argparse.Namespace,
    **overrides: Any,
) -> Any:
    """Build `model` from the flags given (over its env vars); SettingsError when invalid."""
    style = getattr(args, "_settings_style", KEBAB)
    given = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    try:
        return _build(model, {**given, **overrides})
    except ValidationError as exc:
        raise SettingsError(describe(exc, model, style)) from exc
    except SourceError as exc:  # an env var no source could read
        cause = exc.__cause__
        if isinstance(cause, EnvValueError):
            raise SettingsError(str(cause)) from exc
        found = _SOURCE_FIELD.search(str(exc))
        where = f"env {env_name(model, found.group(1))}" if found else "environment"
        raise SettingsError(f"{where}: cannot be read ({cause or exc})") from exc


SHOWN_CHARS = 80  # of a rejected value echoed in an error line


def shown(value: Any) -> str:
    """A rejected value as an error line echoes it: its repr, cut to SHOWN_CHARS with its length
    said, so a huge flag or variable does not become a huge line."""
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{text[:SHOWN_CHARS]}...{size}"


def describe(exc: ValidationError, model: type[BaseSettings], style: FlagStyle = KEBAB) -> str:
    """A pydantic error as one line: `--flag: message` for each problem, joined by `; `."""
    parts = []
    for err in exc.errors(include_url=False):
        message = err["msg"].removeprefix("Value error, ")
        loc = err["loc"]
        if loc and loc[0] in model.model_fields:
            name = str(loc[0])
            where = f"{style.flag_for(name)} (env {env_name(model, name)})"
            if err["type"] not in ("missing", "value_error"):  # our own messages name the value
                message = f"{message}, got {shown(err['input'])}"
            parts.append(f"{where}: {message}")
        else:
            parts.append(message)
    return "; ".join(part.replace("\n", " ") for part in parts)
