"""Our byte-level BPE vocabulary: trained at build time on the training text, stored as JSON.

Ids 0-255 are the bytes themselves, then one id per merged piece in the order the merges were
learnt, unused ids (never produced) up to the preset's size, and the special tokens last:
end-of-text, end-of-turn (`tokenpulse.chatformat`). Text is first cut into words by
SPLIT_PATTERN (GPT-2's idea: letters, digits, punctuation and whitespace runs, a space joined
to the word after it, but a space after punctuation joined to the punctuation: a chat prompt
ends with "Assistant: ", and under GPT-2's split that last space is a word of its own, which the
training text never shows before a word, so the answer began with junk; now ": " is one piece
in the prompt and in training), written for both regex engines that read it: RE2, in the graph
(`tokenizer.py`), and the `tokenizers` package's, which trains the merges and encodes the
training text (no bounded repeats: RE2's DFA runs out of memory on them). A word is then cut into
pieces of at most MAX_WORD_BYTES bytes before its merges: merging a word of L bytes costs up to
L rounds of O(L), so one long word would cost seconds to hours of CPU: a run of spaces is one
word, 16,384 spaces (the longest prompt the gateway passes) about 15 CPU-s by the square of
20,000's measured 21.9, and the model server's REST API takes 16 MiB bodies. Cut, a word costs
O(L). No merge of the vocabulary
is longer than the cut, and both encoders cut the same way. No TensorFlow here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from tokenpulse.chatformat import SPECIAL_TOKENS

N_BYTES = 256
_WS = r"\t\n\x0b\x0c\r\p{Z}"  # not `\s`: RE2's is ASCII only, the other engine's is Unicode
SPLIT_PATTERN = rf" ?\p{{L}}+| ?\p{{N}}+| ?[^{_WS}\p{{L}}\p{{N}}]+ ?|[{_WS}]+"
MAX_WORD_BYTES = 64  # above every special token's text, which stays one piece


class BpeError(ValueError):
    """A vocabulary that does not fit its preset or cannot be read."""


@cache
def _byte_chars() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (what the `tokenizers` package uses)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def _to_chars(piece: bytes) -> str:
    table = _byte_chars()
    return "".join(table[b] for b in piece)


def _to_bytes(chars: str) -> bytes:
    back = {c: b for b, c in _byte_chars().items()}
    return bytes(back[c] for c in chars)


@dataclass(frozen=True)
class BpeSpec:
    """A trained vocabulary: the merges in rank order, for a model of `vocab_size` ids."""

    vocab_size: int
    merges: tuple[tuple[bytes, bytes], ...]

    def __post_init__(self) -> None:
        used = N_BYTES + len(self.merged) + len(SPECIAL_TOKENS)
        if used > self.vocab_size:
            raise BpeError(f"{used} ids do not fit a vocabulary of {self.vocab_size}")

    @property
    def merged(self) -> tuple[bytes, ...]:
        """Each new piece the merges make, once, in the order first made."""
        seen: dict[bytes, None] = {}
        for a, b in self.merges:
            seen.setdefault(a + b, None)
        return tuple(seen)

    @property
    def special_ids(self) -> tuple[int, ...]:
        """End-of-text and end-of-turn: the last ids."""
        first = self.vocab_size - len(SPECIAL_TOKENS)
        return tuple(range(first, self.vocab_size))

    def pieces(self) -> tuple[bytes, ...]:
        """Each id's bytes (special and unused ids: none)."""
        merged = self.merged
        unused = self.vocab_size - N_BYTES - len(merged) - len(SPECIAL_TOKENS)
        return (
            tuple(bytes([b]) for b in range(N_BYTES))
            + merged
            + (b"",) * (unused + len(SPECIAL_TOKENS))
        )

    def ids(self) -> dict[bytes, int]:
        """Piece -> id, for the bytes and the merged pieces."""
        return {p: i for i, p in enumerate(self.pieces()[: N_BYTES + len(self.merged)])}

    def merge_table(self) -> tuple[list[int], list[int]]:
        """Keys `left * V + right` -> values `rank * V + merged id`, for the in-graph merges."""
        ids, size = self.ids(), self.vocab_size
        table: dict[int, int] = {}
        for rank, (a, b) in enumerate(self.merges):
            table.setdefault(ids[a] * size + ids[b], rank * size + ids[a + b])
        return list(table), list(table.values())

    def to_json(self) -> str:
        """The vocabulary as a JSON document (pieces in hex)."""
        return json.dumps(
            {
                "kind": "byte-level-bpe",
                "vocab_size": self.vocab_size,
                "split_pattern": SPLIT_PATTERN,
                "max_word_bytes": MAX_WORD_BYTES,
                "special_tokens": list(SPECIAL_TOKENS),
                "merges": [[a.hex(), b.hex()] for a, b in self.merges],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> BpeSpec:
        """Read `to_json`'s document; a vocabulary of another split or specials is refused."""
        try:
            raw = json.loads(text)
            merges = tuple((bytes.fromhex(a), bytes.fromhex(b)) for a, b in raw["merges"])
            size = int(raw["vocab_size"])
        except (ValueError, KeyError, TypeError) as exc:
            raise BpeError(f"unreadable vocabulary: {exc}") from exc
        if raw.get("split_pattern") != SPLIT_PATTERN:
            raise BpeError("the vocabulary was trained with another split pattern")
        if raw.get("max_word_bytes") != MAX_WORD_BYTES:
            raise BpeError(
                f"the vocabulary was trained with words cut at {raw.get('max_word_bytes')} bytes,"
                f" not {MAX_WORD_BYTES}: build the model again"
            )
        if tuple(raw.get("special_tokens", ())) != SPECIAL_TOKENS:
            raise BpeError("the vocabulary has other special tokens")
        return cls(size, merges)


def _tokenizer(vocab: dict[str, int] | None = None, merges: Sequence[Any] = ()) -> Any:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    model = models.BPE(vocab, list(merges)) if vocab is not None else models.BPE()
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            # after ByteLevel each character is one byte (none of them a newline)
            pre_tokenizers.Split(Regex(f".{{1,{MAX_WORD_BYTES}}}"), behavior="isolated"),
        ]
    )
    return tok


def train(texts: Iterable[str], vocab_size: int) -> BpeSpec:
    """Learn the merges of a `vocab_size` vocabulary from `texts` (deterministic for the texts)."""
    from tokenizers import pre_tokenizers, trainers

    tok = _tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
    )
    # special-token text is no word to learn: cut it out, as the encoder reads it as one id
    tok.train_from_iterator((_strip_specials(t) for t in texts), trainer)
    raw = json.loads(tok.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in raw]
    return BpeSpec(vocab_size, tuple((_to_bytes(a), _to_bytes(b)) for a, b in pairs))


def _strip_specials(text: str) -> str:
    for token in SPECIAL_TOKENS:
        text = text.replace(token, "\n")
    return text


class Encoder:
    """The spec's encoder in Python (the `tokenizers` package): what training reads."""

    def __init__(self, spec: BpeSpec) -> None:
        ids = spec.ids()
        vocab = {_to_chars(p): i for p, i in ids.items()}
        merges = [(_to_chars(a), _to_chars(b)) for a, b in spec.merges]
        for token, index in zip(SPECIAL_TOKENS, spec.special_ids, strict=True):
            vocab[token] = index
        self._tok = _tokenizer(vocab, merges)
        self._tok.add_special_tokens(list(SPECIAL_TOKENS))

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's ids (special-token text is that token's id)."""
        return [np.asarray(e.ids, np.int32) for e in self._tok.encode_batch(list(texts))]
