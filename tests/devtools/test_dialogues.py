"""devtools.dialogues: its lines and fillers come from dialogues.yaml, checked on load."""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from devtools import dialogues, slots
from devtools.dialogues import (
    DATA_FILE,
    SEED_KINDS,
    SEED_LINES,
    TOPICS,
    DialogueDataError,
    clean_dialogues,
    load,
    seeded_dialogues,
)

RAW = yaml.safe_load(DATA_FILE.read_text(encoding="utf-8"))


def test_every_slot_has_lines_and_every_language_its_speakers() -> None:
    assert set(SEED_LINES) == set(slots.SLOTS)
    assert set(TOPICS) == set(dialogues._SPEAKERS) == {"zh", "en"}
    tables = [*SEED_LINES.values(), *TOPICS.values()]
    assert all(type(lines) is tuple and lines for table in tables for lines in table.values())


def test_seeded_spans_hold_their_values_and_every_kind_is_planted() -> None:
    planted = set()
    for dialogue in seeded_dialogues(seed=5, size=400):
        assert dialogue.seeded
        for s in dialogue.seeded:
            assert dialogue.text[s.start : s.end] == s.value.text
            planted.add(s.value.kind)
    assert planted == set(SEED_KINDS)


def test_a_seed_gives_the_same_dialogues_and_clean_ones_plant_nothing() -> None:
    assert seeded_dialogues(7, 50) == seeded_dialogues(7, 50)
    assert clean_dialogues(8, 50) == clean_dialogues(8, 50)
    assert not any(d.seeded for d in clean_dialogues(8, 300))


def _set(path: tuple[str, ...], value: object) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set(("topics", "en", "books", 0), "C:call me on {MOBILE}"), "topics.en.books: {MOBILE}"),
        (_set(("seed_lines", "JWT", "en", 0), "C:my {token}"), "{token} is no slot or filler"),
        (_set(("seed_lines", "JWT", "en", 0), "my {JWT}"), "does not start with C: or A:"),
        (_set(("seed_lines", "JWT"), {}), "seed_lines.JWT: expected a mapping"),
        (lambda doc: doc["seed_lines"].pop("JWT"), "the slots are"),
        (lambda doc: doc.pop("topics"), "topics: expected a mapping"),
        (_set(("speakers", "en", 0), ["Customer: "]), "is not a [customer, agent] pair"),
        (lambda doc: doc["speakers"].pop("en"), "speakers and topics name different languages"),
        (_set(("fillers", "days"), "{3,5}"), "fillers.days: {3,5} is no template token"),
        (_set(("fillers", "order", 2), "{@order19}"), "fillers.order[2]: {@order19} is no"),
        (_set(("fillers", "count"), "{12-1}"), "fillers.count: {12-1} is no template token"),
        (_set(("fillers", "weight"), "{1-30.{0-9}kg"), "has an unmatched brace"),
        (_set(("fillers", "JWT"), "x"), "fillers ['JWT'] are slots"),
        (lambda doc: doc["fillers"].pop("isbn"), "topics.en.books: {isbn} is no filler"),
    ],
)
def test_a_bad_data_file_is_refused_naming_the_place(
    tmp_path: Path, change: Callable[[dict], None], message: str
) -> None:
    doc = copy.deepcopy(RAW)
    change(doc)
    path = tmp_path / "dialogues.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    with pytest.raises(DialogueDataError) as info:
        load(path)
    assert str(info.value).startswith("dialogues.yaml: ") and message in str(info.value)


def test_an_unreadable_data_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "dialogues.yaml"
    path.write_text("seed_lines: [unclosed\n")
    with pytest.raises(DialogueDataError, match="cannot read"):
        load(path)
    with pytest.raises(DialogueDataError, match="cannot read"):
        load(tmp_path / "missing.yaml")


def test_a_filler_template_draws_each_token_as_written(tmp_path: Path) -> None:
    doc = copy.deepcopy(RAW)
    doc["fillers"]["code"] = "{d3}/{h4}/{AN5}/{1-12:02}/{7-7}/{a|b}/x"
    doc["fillers"]["days"] = ["{1-2}", "{3-4}"]
    path = tmp_path / "dialogues.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    fillers = load(path)[3]
    r = random.Random(3)
    for _ in range(50):
        code = fillers["code"](r)
        assert re.fullmatch(r"\d{3}/[0-9a-f]{4}/[A-Z0-9]{5}/(0[1-9]|1[0-2])/7/[ab]/x", code), code
        assert fillers["days"](r) in {"1", "2", "3", "4"}
