"""Protobuf text format, read against a small schema, without importing protobuf or TensorFlow.

It accepts what protobuf's own text parser accepts for the messages TF Serving reads from files:
`name: 'x'` or `name: "x"` (adjacent strings concatenate, C escapes), a message in `{ }` or `< >`
with an optional `:` before it, `#` comments, `,` or `;` after any field, repeated fields given
again or as a `[a, b]` list, a singular scalar given again over its default value. It rejects
what protobuf rejects: unknown fields, a scalar without `:`, a string where a number belongs (and
the reverse), out-of-range integers, two members of one oneof, a singular message given twice, a
singular scalar given twice with a non-default value. Narrower than protobuf on purpose: no
extensions or `Any` expansion, no `\\u` or `\\?` escapes, no Python-only integer forms (`0b1`,
`1_000`); those are errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tokenpulse.tfserving.errors import ConfigError

_TOKEN = re.compile(
    r"""
    (?P<skip>(?:\s|\#[^\n]*)+)
  | (?P<ident>[A-Za-z_][0-9A-Za-z_+-]*)
  | (?P<number>(?:[0-9+-]|\.[0-9])[0-9A-Za-z_.+-]*)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<punct>[{}<>:\[\],;])
    """,
    re.VERBOSE,
)
_SIMPLE_ESCAPES = {
    "n": b"\n",
    "t": b"\t",
    "r": b"\r",
    "\\": b"\\",
    "'": b"'",
    '"': b'"',
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "v": b"\v",
}
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|(.))", re.DOTALL)
_INTEGER = re.compile(r"-?(?:0[xX][0-9A-Fa-f]+|0[0-7]*|[1-9][0-9]*)")
_RANGES = {"int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1), "int32": (-(2**31), 2**31 - 1)}
_BOOLS = {"true": True, "True": True, "t": True, "1": True}
_BOOLS |= {"false": False, "False": False, "f": False, "0": False}


@dataclass(frozen=True)
class Field:
    """One field of a schema: a scalar kind (string, int64, uint32, bool, enum) or `message`."""

    kind: str
    repeated: bool = False
    message: MessageType | None = None
    enum: tuple[str, ...] = ()  # enum value names, numbered from 0
    oneof: str | None = None


@dataclass(frozen=True)
class MessageType:
    """A message's name (for errors) and fields."""

    name: str
    fields: dict[str, Field]


@dataclass
class Message:
    """A parsed message: set fields only; repeated fields are lists, in file order."""

    type: MessageType
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """A field's value, or `default` when it was not set."""
        return self.values.get(name, default)

    def has(self, name: str) -> bool:
        """Whether the field was set (a message given as `{}` counts as set)."""
        return name in self.values


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int
    column: int


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        column = pos - line_start + 1
        if m is None:
            ch = text[pos]
            what = "unterminated string" if ch in "'\"" else f"unexpected character {ch!r}"
            raise ConfigError(what, line, column)
        kind = m.lastgroup or ""
        if kind != "skip":
            out.append(_Tok(kind, m.group(), line, column))
        newlines = m.group().count("\n")
        if newlines:
            line += newlines
            line_start = m.start() + m.group().rindex("\n") + 1
        pos = m.end()
    return out


def _unescape(tok: _Tok) -> bytes:
    inner = tok.text[1:-1]
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(inner):
        out += inner[pos : m.start()].encode("utf-8")
        octal, hexa, other = m.groups()
        if octal is not None:
            value = int(octal, 8)
            if value > 255:
                raise ConfigError(f"octal escape \\{octal} out of range", tok.line, tok.column)
            out.append(value)
        elif hexa is not None:
            out.append(int(hexa, 16))
        elif other in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[other]
        else:
            raise ConfigError(f"invalid escape sequence \\{other}", tok.line, tok.column)
        pos = m.end()
    out += inner[pos:].encode("utf-8")
    return bytes(out)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, what: str) -> _Tok:
        tok = self.peek()
        if tok is None:
            last = self.toks[-1] if self.toks else _Tok("", "", 1, 0)
            raise ConfigError(
                f"unexpected end of file, expected {what}", last.line, last.column + len(last.text)
            )
        self.i += 1
        return tok

    def try_punct(self, char: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "punct" and tok.text == char:
            self.i += 1
            return True
        return False

    def expect(self, char: str) -> None:
        tok = self.take(f"'{char}'")
        if tok.kind != "punct" or tok.text != char:
            raise ConfigError(f"expected '{char}', got {tok.text!r}", tok.line, tok.column)

    def message(self, mtype: MessageType, closer: str | None) -> Message:
        msg = Message(mtype)
        while True:
            tok = self.peek()
            if tok is None:
                if closer is not None:
                    self.expect(closer)
                return msg
            if closer is not None and tok.kind == "punct" and tok.text == closer:
                self.i += 1
                return msg
            self.i += 1
            if tok.kind != "ident":
                raise ConfigError(f"expected a field name, got {tok.text!r}", tok.line, tok.column)
            spec = mtype.fields.get(tok.text)
            if spec is None:
                raise ConfigError(
                    f'message type "{mtype.name}" has no field named "{tok.text}"',
                    tok.line,
                    tok.column,
                )
            self._check_oneof(msg, tok, spec)
            self._field(msg, tok.text, spec)
            if not self.try_punct(","):
                self.try_punct(";")

    def _check_oneof(self, msg: Message, tok: _Tok, spec: Field) -> None:
        if spec.oneof is None:
            return
        for other, other_spec in msg.type.fields.items():
            if other != tok.text and other_spec.oneof == spec.oneof and msg.has(other):
                raise ConfigError(
                    f'field "{tok.text}" is specified along with field "{other}", another '
                    f'member of oneof "{spec.oneof}" of message type "{msg.type.name}"',
                    tok.line,
                    tok.column,
                )

    def _field(self, msg: Message, name: str, spec: Field) -> None:
        if spec.message is not None:
            self.try_punct(":")
        else:
            self.expect(":")
        if spec.repeated and self.try_punct("["):
            if self.try_punct("]"):
                msg.values.setdefault(name, [])
                return
            while True:
                self._one(msg, name, spec)
                if self.try_punct("]"):
                    return
                self.expect(",")
        self._one(msg, name, spec)

    def _one(self, msg: Message, name: str, spec: Field) -> None:
        if spec.message is not None:
            tok = self.take("'{' or '<'")
            if tok.kind != "punct" or tok.text not in "{<":
                raise ConfigError(f"expected '{{' or '<', got {tok.text!r}", tok.line, tok.column)
            closer = "}" if tok.text == "{" else ">"
            if spec.repeated:
                msg.values.setdefault(name, []).append(self.message(spec.message, closer))
                return
            if name in msg.values:
                raise self._twice(msg, name, tok)
            msg.values[name] = self.message(spec.message, closer)
            return
        start = self.peek()
        value = self._scalar(name, spec)
        if spec.repeated:
            msg.values.setdefault(name, []).append(value)
            return
        if msg.values.get(name) and start is not None:
            raise self._twice(msg, name, start)  # proto3 scalars: again only over the default
        msg.values[name] = value

    @staticmethod
    def _twice(msg: Message, name: str, tok: _Tok) -> ConfigError:
        return ConfigError(
            f'message type "{msg.type.name}" should not have multiple "{name}" fields',
            tok.line,
            tok.column,
        )

    def _scalar(self, name: str, spec: Field) -> Any:
        tok = self.take(f"a value for {name!r}")
        if spec.kind == "string":
            if tok.kind != "string":
                raise ConfigError(f"expected a string, got {tok.text!r}", tok.line, tok.column)
            raw = _unescape(tok)
            while (nxt := self.peek()) is not None and nxt.kind == "string":
                raw += _unescape(nxt)  # adjacent strings concatenate
                self.i += 1
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError("string is not valid UTF-8", tok.line, tok.column) from exc
        if spec.kind == "bool":
            if tok.text not in _BOOLS or tok.kind == "string":
                raise ConfigError(
                    f'expected "true" or "false", got {tok.text!r}', tok.line, tok.column
                )
            return _BOOLS[tok.text]
        if spec.kind == "enum":
            if tok.kind == "ident":
                if tok.text not in spec.enum:
                    raise ConfigError(f"unknown enum value {tok.text!r}", tok.line, tok.column)
                return spec.enum.index(tok.text)
            return _integer(tok, "int32")  # proto3 enums are open: any int32 number
        return _integer(tok, spec.kind)


def _integer(tok: _Tok, kind: str) -> int:
    if tok.kind != "number" or not _INTEGER.fullmatch(tok.text):
        raise ConfigError(f"expected an integer, got {tok.text!r}", tok.line, tok.column)
    text = tok.text
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif len(digits) > 1 and digits.startswith("0"):
        value = int(digits, 8)  # C-style octal, as protobuf reads it
    else:
        value = int(digits)
    value = -value if negative else value
    low, high = _RANGES[kind]
    if not low <= value <= high:
        raise ConfigError(f"integer {text} out of range for {kind}", tok.line, tok.column)
    return value


def parse(text: str, root: MessageType) -> Message:
    """Parse a whole text-format document as a message of type `root`."""
    return _Parser(text).message(root, None)
