"""Turn a pydantic-settings model into argparse flags: one home for every option.

Every field becomes a flag whose `--help` shows the field's description, its default and its
environment variable (`<env_prefix><FIELD>`). A flag that is not given never reaches the settings,
so the environment fills it; a flag that is given beats the environment. Values reach pydantic as
the strings typed, so a bad value gets the same one-line error as a bad environment variable.

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
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings


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
    parser.set_defaults(_settings_prog=parser.prog, _settings_style=style)


def settings_from_args(
    model: type[BaseSettings],
    args: argparse.Namespace,
    **overrides: Any,
) -> Any:
    """Build `model` from the flags given (over its env vars); SettingsError when invalid."""
    style = getattr(args, "_settings_style", KEBAB)
    given = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    try:
        return model(**{**given, **overrides})
    except ValidationError as exc:
        raise SettingsError(describe(exc, model, style)) from exc


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
                message = f"{message}, got {err['input']!r}"
            parts.append(f"{where}: {message}")
        else:
            parts.append(message)
    return "; ".join(part.replace("\n", " ") for part in parts)
