"""The chat dialogues our model trains on: checked data, rendered in the chat format."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.model import dialogues
from tokenpulse import chatformat


def test_dialogues_are_chat_turns_ending_with_the_assistant_and_fixed_by_the_seed() -> None:
    texts = dialogues.dialogues(20_000, seed=3)
    assert texts == dialogues.dialogues(20_000, seed=3) != dialogues.dialogues(20_000, seed=4)
    for text in texts:
        turns = text.split(chatformat.TURN_END)[:-1]
        assert text.endswith(chatformat.TURN_END) and turns[-1].startswith("Assistant: ")
        assert all(t.split(": ", 1)[0] in chatformat.ROLE_NAMES for t in turns)
        assert "{" not in text  # every value filled in
    assert any("您好" in t for t in texts) and any("order number" in t for t in texts)


@pytest.mark.parametrize(
    ("line", "words"),
    [('"X:hello"', "starts with U: or A:"), ('"U:{nowhere}"', "no values for")],
)
def test_a_bad_data_file_is_refused_naming_the_line(tmp_path: Path, line: str, words: str):
    data = tmp_path / "dialogues.yaml"
    data.write_text(
        "systems: {en: [hi]}\ntopics:\n  en:\n    t:\n      - " + line + '\n      - "A:ok"\n'
        "values: {days: ['1']}\n"
    )
    with pytest.raises(dialogues.DialogueDataError, match=words):
        dialogues.load(data)
