"""Read TF Serving's `--model_config_file` (text-format ModelServerConfig) without TensorFlow.

`model_server_config_pb2` would import all of TensorFlow, so this module carries a small
text-proto reader: enough for `config { name base_path version_labels }`, strict about syntax,
tolerant of fields it does not need (they are parsed and ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+)[fF]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}<>:;,\[\]])
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


class ModelConfigError(ValueError):
    """The model config file is missing or not valid text-format ModelServerConfig."""


@dataclass
class Message:
    """A parsed text-proto message: field name -> values in file order (repeated fields)."""

    fields: dict[str, list[object]] = field(default_factory=dict)

    def all(self, name: str) -> list[object]:
        """Every value of a (possibly repeated) field."""
        return self.fields.get(name, [])

    def one(self, name: str, default: object = None) -> object:
        """The last value of a field, as proto text format does for singular fields."""
        values = self.fields.get(name)
        return values[-1] if values else default


@dataclass(frozen=True)
class ModelEntry:
    """One `config { ... }` entry: what the exporter needs of a served model."""

    name: str
    base_path: Path | None  # None: unknown (no config file, no --model-base-path)
    labels: dict[str, int]


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ModelConfigError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    return out


def _unquote(raw: str, line: int) -> str:
    body, out, i = raw[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise ModelConfigError(f"line {line}: unsupported escape \\{nxt}")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def _peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _next(self, what: str) -> tuple[str, str, int]:
        tok = self._peek()
        if tok is None:
            last = self.toks[-1][2] if self.toks else 1
            raise ModelConfigError(f"line {last}: unexpected end of file, expected {what}")
        self.i += 1
        return tok

    def message(self, closer: str | None) -> Message:
        msg = Message()
        while True:
            tok = self._peek()
            if tok is None:
                if closer is not None:
                    self._next(f"'{closer}'")
                return msg
            kind, text, line = tok
            if kind == "punct" and text == closer:
                self.i += 1
                return msg
            if kind == "punct" and text in ",;":
                self.i += 1
                continue
            if kind != "ident":
                raise ModelConfigError(f"line {line}: expected a field name, got {text!r}")
            self.i += 1
            msg.fields.setdefault(text, []).append(self._value(text, line))

    def _value(self, name: str, line: int) -> object:
        kind, text, vline = self._next(f"a value for {name!r}")
        if kind == "punct" and text == ":":
            kind, text, vline = self._next(f"a value for {name!r}")
        if kind == "punct" and text in "{<":
            return self.message("}" if text == "{" else ">")
        if kind == "string":
            parts = [_unquote(text, vline)]
            while (tok := self._peek()) is not None and tok[0] == "string":
                parts.append(_unquote(tok[1], tok[2]))  # adjacent strings concatenate
                self.i += 1
            return "".join(parts)
        if kind == "number":
            clean = text.rstrip("fF")
            return int(clean) if re.fullmatch(r"[-+]?\d+", clean) else float(clean)
        if kind == "ident":
            return text  # enum value or true/false
        raise ModelConfigError(f"line {vline}: unexpected {text!r} after {name!r}")


def parse_text_proto(text: str) -> Message:
    """Parse text-format protobuf into nested Messages (no schema: every field kept)."""
    return _Parser(text).message(None)


def parse_model_config(text: str) -> list[ModelEntry]:
    """The served models of a ModelServerConfig text file."""
    root = parse_text_proto(text)
    lists = root.all("model_config_list")
    if not lists:
        raise ModelConfigError("no model_config_list in model config")
    entries: list[ModelEntry] = []
    for config_list in lists:
        if not isinstance(config_list, Message):
            raise ModelConfigError("model_config_list must be a message")
        for config in config_list.all("config"):
            entries.append(_entry(config))
    names = [e.name for e in entries]
    if len(names) != len(set(names)):
        raise ModelConfigError("model names must be unique in model config")
    return entries


def _entry(config: object) -> ModelEntry:
    if not isinstance(config, Message):
        raise ModelConfigError("config must be a message")
    name, base_path = config.one("name"), config.one("base_path")
    if not isinstance(name, str) or not name:
        raise ModelConfigError("config entry without a name")
    if not isinstance(base_path, str) or not base_path:
        raise ModelConfigError(f"model {name!r} has no base_path")
    labels: dict[str, int] = {}
    for item in config.all("version_labels"):
        key = item.one("key") if isinstance(item, Message) else None
        value = item.one("value") if isinstance(item, Message) else None
        if not isinstance(key, str) or not isinstance(value, int):
            raise ModelConfigError(f"model {name!r}: version_labels need a key and an int value")
        labels[key] = value
    return ModelEntry(name=name, base_path=Path(base_path), labels=labels)


def load_model_config(path: Path) -> list[ModelEntry]:
    """Read and parse a model config file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ModelConfigError(f"cannot read model config {path}: {exc.strerror}") from exc
    return parse_model_config(text)
