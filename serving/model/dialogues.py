"""Chat training text: the customer-service dialogues of `dialogues.yaml`, in the chat format.

Each dialogue is an optional system turn, then user and assistant turns of one topic, cut after
one of the assistant's turns, every turn closed by end-of-turn (`tokenpulse.chatformat`, the
format the gateway's chat prompts have). Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from tokenpulse import chatformat

DATA_FILE = Path(__file__).with_name("dialogues.yaml")
_SPEAKERS = {"U": chatformat.ROLES["user"], "A": chatformat.ROLES["assistant"]}
_VALUE = re.compile(r"\{(\w+)\}")


class DialogueDataError(ValueError):
    """The dialogues' data file lacks a part or names a value it does not define."""


@dataclass(frozen=True)
class Data:
    """The data file, checked: per language, system prompts and topics' (speaker, line) turns."""

    systems: dict[str, tuple[str, ...]]
    topics: dict[str, tuple[tuple[tuple[str, str], ...], ...]]
    values: dict[str, tuple[str, ...]]


@cache
def load(path: Path = DATA_FILE) -> Data:
    """Read and check the data file."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    values = {k: tuple(map(str, v)) for k, v in raw["values"].items()}
    topics: dict[str, tuple[tuple[tuple[str, str], ...], ...]] = {}
    for lang, by_topic in raw["topics"].items():
        dialogues = []
        for name, lines in by_topic.items():
            turns = []
            for line in lines:
                speaker, _, text = str(line).partition(":")
                if speaker not in _SPEAKERS or not text:
                    raise DialogueDataError(f"{lang}.{name}: a line starts with U: or A:: {line!r}")
                missing = set(_VALUE.findall(text)) - set(values)
                if missing:
                    raise DialogueDataError(f"{lang}.{name}: no values for {sorted(missing)}")
                turns.append((speaker, text))
            if "A" not in (s for s, _ in turns):
                raise DialogueDataError(f"{lang}.{name}: no assistant turn")
            dialogues.append(tuple(turns))
        topics[lang] = tuple(dialogues)
    systems = {lang: tuple(map(str, lines)) for lang, lines in raw["systems"].items()}
    return Data(systems, topics, values)


def render(rng: random.Random, data: Data) -> str:
    """One dialogue in the chat format, without the open assistant turn."""
    lang = rng.choice(sorted(data.topics))
    turns = list(rng.choice(data.topics[lang]))
    ends = [i for i, (speaker, _) in enumerate(turns) if speaker == "A"]
    turns = turns[: rng.choice(ends) + 1]
    chosen = {name: rng.choice(options) for name, options in data.values.items()}
    rendered = [(_SPEAKERS[s], _VALUE.sub(lambda m: chosen[m.group(1)], text)) for s, text in turns]
    if rng.random() < 0.5:
        rendered.insert(0, (chatformat.ROLES["system"], rng.choice(data.systems[lang])))
    return chatformat.render(rendered, answer=False)


def dialogues(budget: int, seed: int) -> list[str]:
    """Rendered dialogues of about `budget` characters in all."""
    rng, data = random.Random(seed), load()
    out, size = [], 0
    while size < budget:
        out.append(render(rng, data))
        size += len(out[-1])
    return out
