"""The redaction corpus: customer-service dialogues in Chinese and English, seeded and clean.

Seeded dialogues carry values from `devtools.seeds` (every kind, with the span of each in the
text); clean ones carry only the numbers such conversations are full of: order, tracking and
invoice numbers, dates, times, versions, amounts, room and model numbers. Both were written
from how these conversations go, not from the redaction patterns, so that
`tokenpulse bench redaction` measures recall and false positives rather than restating the
patterns. Deterministic for a seed. The lines and the clean fillers' templates are data
(`dialogues.yaml` beside this module, checked on load); the seeded slots are `devtools.slots`;
this module loads the data and renders the dialogues.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from devtools import seeds
from devtools.seeds import Value
from devtools.slots import SLOTS, digits


def _order18(r: random.Random) -> str:
    """An 18-digit order number (as Taobao and others use) that is not a resident ID."""
    while True:
        n = str(r.randint(1, 9)) + digits(r, 17)
        birth_ok = re.fullmatch(r"(19[5-9]\d|200\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])", n[6:14])
        if not (birth_ok and seeds.cn_id_check(n[:17]) == n[17]):
            return n


# the values a filler template names as `{@name}`: only code makes them
_MADE: dict[str, Callable[[random.Random], str]] = {
    "order18": _order18,
    "public_block": seeds.public_block,
}
_RUNS = {  # `{<letter(s)><n>}`: n characters drawn from this alphabet
    "d": string.digits,
    "h": "0123456789abcdef",
    "AN": string.ascii_uppercase + string.digits,
}
_TOKEN = re.compile(r"\{([^{}]*)\}")
_RUN = re.compile(r"(d|h|AN)(\d+)")
_RANGE = re.compile(r"(\d+)-(\d+)(?::0(\d))?")
Part = Callable[[random.Random], str]
Template = tuple[str | Part, ...]


# --- the data file: seeded lines per slot, the topics' clean turns, the fillers, the speakers -----
DATA_FILE = Path(__file__).with_name("dialogues.yaml")
Lines = tuple[str, ...]
Table = dict[str, dict[str, Lines]]  # slot or language -> language or topic -> lines
Speakers = dict[str, list[tuple[str, str]]]  # language -> (customer, agent) labels
Filler = Callable[[random.Random], str]


class DialogueDataError(Exception):
    """The dialogues' data file lacks a part or holds a line the renderer cannot use."""


def _list(where: str, raw: object) -> list[object]:
    if not isinstance(raw, list) or not raw:
        raise DialogueDataError(f"{where}: expected a list")
    return raw


def _mapping(where: str, raw: object) -> dict[str, object]:
    if not isinstance(raw, dict) or not raw:
        raise DialogueDataError(f"{where}: expected a mapping")
    return raw


def _part(where: str, token: str) -> str | Part:
    """One `{...}` of a filler template as a generator."""
    if "|" in token:
        options = token.split("|")
        return lambda r: r.choice(options)
    if run := _RUN.fullmatch(token):
        alphabet, n = _RUNS[run.group(1)], int(run.group(2))
        return lambda r: "".join(r.choice(alphabet) for _ in range(n))
    if span := _RANGE.fullmatch(token):
        low, high = int(span.group(1)), int(span.group(2))
        shape = f"0{span.group(3)}d" if span.group(3) else "d"
        if low <= high:
            return lambda r: format(r.randint(low, high), shape)
    if token.startswith("@") and token[1:] in _MADE:
        return _MADE[token[1:]]
    raise DialogueDataError(f"{where}: {{{token}}} is no template token")


def _template(where: str, raw: object) -> Template:
    """A filler template as literal text and generators, in order."""
    if not isinstance(raw, str):
        raise DialogueDataError(f"{where}: {raw!r} is not a template")
    parts: list[str | Part] = []
    last = 0
    for token in _TOKEN.finditer(raw):
        parts += [raw[last : token.start()], _part(where, token.group(1))]
        last = token.end()
    parts.append(raw[last:])
    if any(isinstance(p, str) and ("{" in p or "}" in p) for p in parts):
        raise DialogueDataError(f"{where}: {raw!r} has an unmatched brace")
    return tuple(p for p in parts if p != "")


def _expand(template: Template, r: random.Random) -> str:
    return "".join(p if isinstance(p, str) else p(r) for p in template)


def _filler(where: str, raw: object) -> Filler:
    """One template, or a list of them of which one is picked."""
    if not isinstance(raw, list):
        one = _template(where, raw)
        return lambda r: _expand(one, r)
    templates = [_template(f"{where}[{n}]", t) for n, t in enumerate(_list(where, raw))]
    # every template is expanded before one is picked, as the generators written in Python did,
    # so that a seed still gives the same corpus (and `tokenpulse bench redaction` its figures)
    return lambda r: r.choice([_expand(t, r) for t in templates])


def _lines(where: str, raw: object, fillers: dict[str, Filler], planted: bool) -> Lines:
    """A list of `C:`/`A:` lines whose placeholders all have a generator."""
    lines = _list(where, raw)
    for line in lines:
        if not isinstance(line, str) or line[:2] not in ("C:", "A:"):
            raise DialogueDataError(f"{where}: {line!r} does not start with C: or A:")
        for name in _SLOT.findall(line):
            if name not in fillers and (name not in SLOTS or not planted):
                kind = "slot or filler" if planted else "filler (a topic line plants nothing)"
                raise DialogueDataError(f"{where}: {{{name}}} is no {kind}")
    return tuple(str(line) for line in lines)


def _pairs(where: str, raw: object) -> list[tuple[str, str]]:
    out = []
    for pair in _list(where, raw):
        labels = pair if isinstance(pair, list) else []
        if len(labels) != 2 or not all(isinstance(x, str) for x in labels):
            raise DialogueDataError(f"{where}: {pair!r} is not a [customer, agent] pair of labels")
        out.append((str(labels[0]), str(labels[1])))
    return out


def load(path: Path = DATA_FILE) -> tuple[Table, Table, Speakers, dict[str, Filler]]:
    """The seeded lines per slot and language, the topics per language, the speaker labels and
    the clean fillers."""
    try:
        doc = _mapping(path.name, yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as exc:
        raise DialogueDataError(f"cannot read {path}: {exc}") from exc
    fillers = {
        str(name): _filler(f"{path.name}: fillers.{name}", raw)
        for name, raw in _mapping(f"{path.name}: fillers", doc.get("fillers")).items()
    }
    if clash := sorted(set(fillers) & set(SLOTS)):
        raise DialogueDataError(f"{path.name}: fillers {clash} are slots")
    seeded = {
        slot: {
            lang: _lines(f"{path.name}: seed_lines.{slot}.{lang}", lines, fillers, planted=True)
            for lang, lines in _mapping(f"{path.name}: seed_lines.{slot}", by_lang).items()
        }
        for slot, by_lang in _mapping(f"{path.name}: seed_lines", doc.get("seed_lines")).items()
    }
    if set(seeded) != set(SLOTS):  # a slot without lines would never be planted
        raise DialogueDataError(
            f"{path.name}: seed_lines name {sorted(seeded)}, the slots are {sorted(SLOTS)}"
        )
    topics = {
        lang: {
            topic: _lines(f"{path.name}: topics.{lang}.{topic}", lines, fillers, planted=False)
            for topic, lines in _mapping(f"{path.name}: topics.{lang}", by_topic).items()
        }
        for lang, by_topic in _mapping(f"{path.name}: topics", doc.get("topics")).items()
    }
    speakers = {
        lang: _pairs(f"{path.name}: speakers.{lang}", pairs)
        for lang, pairs in _mapping(f"{path.name}: speakers", doc.get("speakers")).items()
    }
    if set(speakers) != set(topics):
        raise DialogueDataError(f"{path.name}: speakers and topics name different languages")
    return seeded, topics, speakers, fillers


_SLOT = re.compile(r"\{(\w+)\}")
SEED_LINES, TOPICS, _SPEAKERS, _FILLERS = load()
SEED_KINDS = (
    "phone",
    "cn_id",
    "passport",
    "card",
    "iban",
    "us_ssn",
    "email",
    "ipv4",
    "ipv6",
    "api_key",
    "jwt",
    "private_key",
    "secret",
    "url_credentials",
    "bearer",
)


@dataclass(frozen=True, slots=True)
class Seeded:
    """A value planted in a dialogue: the span of its text, and the value."""

    start: int
    end: int
    value: Value


@dataclass(frozen=True, slots=True)
class Dialogue:
    """One conversation as one text, and what was planted in it (nothing, when clean)."""

    lang: str
    topic: str
    text: str
    seeded: tuple[Seeded, ...] = ()


def _render(lines: list[str], lang: str, r: random.Random) -> tuple[str, tuple[Seeded, ...]]:
    customer, agent = r.choice(_SPEAKERS[lang])
    out: list[str] = []
    planted: list[Seeded] = []
    at = 0
    for n, line in enumerate(lines):
        if n:
            out.append("\n")
            at += 1
        who, body = line.split(":", 1)
        label = customer if who == "C" else agent
        out.append(label)
        at += len(label)
        last = 0
        for m in _SLOT.finditer(body):
            lit = body[last : m.start()]
            out.append(lit)
            at += len(lit)
            name = m.group(1)
            if name in SLOTS:
                piece = SLOTS[name](r)
                for offset, value in piece.values:
                    start = at + offset
                    planted.append(Seeded(start, start + len(value.text), value))
                text = piece.text
            else:
                text = _FILLERS[name](r)
            out.append(text)
            at += len(text)
            last = m.end()
        out.append(body[last:])
        at += len(body) - last
    return "".join(out), tuple(planted)


def seeded_dialogues(seed: int, size: int) -> list[Dialogue]:
    """`size` dialogues, each with one to three seeded lines among a topic's clean turns;
    the slots take turns (in an order shuffled each round), so every kind is planted often."""
    r = random.Random(seed)
    slots: list[str] = []
    out = []
    for _ in range(size):
        picks = []
        for _ in range(r.choice((1, 1, 2, 3))):
            if not slots:
                slots = sorted(SEED_LINES)
                r.shuffle(slots)
            picks.append(slots.pop())
        lang = r.choice(sorted(SEED_LINES[picks[0]]))
        topic = r.choice(sorted(TOPICS[lang]))
        turns = list(TOPICS[lang][topic][: r.randint(3, len(TOPICS[lang][topic]))])
        for slot in picks:
            by_lang = SEED_LINES[slot]
            line = r.choice(
                by_lang[lang] if lang in by_lang else by_lang[r.choice(sorted(by_lang))]
            )
            turns.insert(r.randint(1, len(turns)), line)
        text, planted = _render(turns, lang, r)
        out.append(Dialogue(lang, topic, text, planted))
    return out


def clean_dialogues(seed: int, size: int) -> list[Dialogue]:
    """`size` dialogues made of topics' clean turns only: numbers, dates, versions, amounts."""
    r = random.Random(seed)
    out = []
    for i in range(size):
        lang = "zh" if i % 3 else "en"
        topic = r.choice(sorted(TOPICS[lang]))
        turns = list(TOPICS[lang][topic])
        if r.random() < 0.5:  # a second topic in the same conversation
            other = TOPICS[lang][r.choice(sorted(TOPICS[lang]))]
            turns += other[1 : r.randint(2, len(other))]
        text, _ = _render(turns, lang, r)
        out.append(Dialogue(lang, topic, text))
    return out
