"""Text analysis, defined once for both stores: how prompt and output text become search terms.

A token is a run of letters and digits, lowercased, cut to 255 characters, except that every
Chinese character (Han), Hiragana and Katakana character is a token of its own: these scripts do
not put spaces between words, so a word is found as the characters in a row (a phrase).

- Elasticsearch runs it as the `genai_text` analyzer (`es_analysis`): a `pattern` tokenizer whose
  Java regex is built from the same character ranges, then `lowercase` and `truncate`.
- SQLite indexes `index_text(text)`, the tokens joined by spaces, into an FTS5 table with the
  `ascii` tokenizer, which splits that text at the spaces and nowhere else (every token is letters
  and digits, and `ascii` treats each non-ASCII character as part of a token).
- The devtools Elasticsearch stand-in analyzes text fields with `tokens`.
"""

from __future__ import annotations

import re
from typing import Any

ANALYZER = "genai_text"
MAX_TOKEN = 255

# Han (CJK ideographs, their extensions and compatibility forms, 々〆〇), Hiragana and Katakana
# (with the phonetic extensions and the half-width forms): one token per character
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x3005, 0x3007),
    (0x3040, 0x30FF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x20000, 0x2FA1F),
    (0x30000, 0x323AF),
)


def _alnum_ranges() -> list[tuple[int, int]]:
    """The CJK ranges cut to their letters and digits (str.isalnum): no ・, ゛ or unassigned."""
    out: list[tuple[int, int]] = []
    for low, high in CJK_RANGES:
        start = None
        for code in range(low, high + 2):
            if code <= high and chr(code).isalnum():
                start = code if start is None else start
            elif start is not None:
                out.append((start, code - 1))
                start = None
    return out


def _java_class() -> str:
    return "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in CJK_RANGES)


_CJK = "".join(f"{chr(a)}-{chr(b)}" for a, b in _alnum_ranges())
# one CJK letter, or a run of other letters and digits (str.isalnum, Java's [\p{L}\p{N}])
_TOKEN = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")
_QUERY_TERM = re.compile(r'"([^"]*)"?|(\S+)')

# the same token definition in Java regex syntax: one CJK letter, or a run of other letters/digits
JAVA_PATTERN = f"[[\\p{{L}}\\p{{N}}]&&[{_java_class()}]]|[[\\p{{L}}\\p{{N}}]&&[^{_java_class()}]]+"


def tokens(text: str) -> list[str]:
    """The search tokens of a text, in order."""
    if "\u0130" in text or "\u03a3" in text:
        # Lucene lowercases one character at a time: İ is i (Python: i + U+0307), Σ always σ
        text = text.replace("\u0130", "i").replace("\u03a3", "\u03c3")
    return [t if len(t) <= MAX_TOKEN else t[:MAX_TOKEN] for t in _TOKEN.findall(text.lower())]


def index_text(text: str | None) -> str:
    """A text as SQLite's FTS5 `ascii` tokenizer must see it: its tokens, space-separated."""
    if not text:
        return ""
    if text.isascii():  # `ascii` splits ASCII text exactly as `tokens` does (case folded there)
        return text
    return " ".join(tokens(text))


def query_terms(text: str) -> list[str]:
    """The terms of a free-text query, each as its tokens joined by spaces.

    Words are split at whitespace; "double quotes" keep several words together as one term. A term
    matches a text holding its tokens in a row; a term without letters or digits is dropped.
    """
    terms = []
    for quoted, word in _QUERY_TERM.findall(text):
        found = tokens(quoted or word)
        if found:
            terms.append(" ".join(found))
    return terms


def es_analysis() -> dict[str, Any]:
    """`index.analysis` settings defining the `genai_text` analyzer."""
    return {
        "tokenizer": {
            f"{ANALYZER}_tokens": {"type": "pattern", "pattern": JAVA_PATTERN, "group": 0}
        },
        "filter": {f"{ANALYZER}_truncate": {"type": "truncate", "length": MAX_TOKEN}},
        "analyzer": {
            ANALYZER: {
                "type": "custom",
                "tokenizer": f"{ANALYZER}_tokens",
                "filter": ["lowercase", f"{ANALYZER}_truncate"],
            }
        },
    }
