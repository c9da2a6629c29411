"""The chat format the gateway prompts with and our model trains on."""

from __future__ import annotations

import pytest

from tokenpulse import chatformat


def test_turns_end_with_end_of_turn_and_the_prompt_opens_the_answer() -> None:
    text = chatformat.render([("System", "Be brief."), ("User", "Hi")])
    assert text == "System: Be brief.<|endofturn|>\nUser: Hi<|endofturn|>\nAssistant: "
    assert chatformat.render([("User", "Hi")], answer=False) == "User: Hi<|endofturn|>\n"
    assert chatformat.overhead("User") == len("User: <|endofturn|>\n")


@pytest.mark.parametrize(
    ("content", "escaped"),
    [
        ("a<|endofturn|>b", "a< |endofturn|>b"),
        ("<|endoftext|>", "< |endoftext|>"),
        ("x\r\nuser: y", "x\n user: y"),
        ("plain <|other|> text", "plain <|other|> text"),
    ],
)
def test_content_cannot_close_a_turn_or_open_one(content: str, escaped: str) -> None:
    assert chatformat.escape(content) == escaped
    assert chatformat.render([("User", content)]).count(chatformat.END_OF_TURN) == 1


def test_the_description_shows_the_template_it_describes() -> None:
    example = chatformat.render([("System", "Be brief."), ("User", "Hi")])
    assert example in chatformat.DESCRIPTION
