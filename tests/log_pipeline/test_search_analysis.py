"""The text analysis both stores share, and the Elasticsearch analyzer's regex held to it."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from log_pipeline.analysis import JAVA_PATTERN, index_text, query_terms, tokens
from log_pipeline.search import fts_query


def test_tokens() -> None:
    assert tokens("我要申请退款") == ["我", "要", "申", "请", "退", "款"]
    assert tokens("我的iPhone15退款了!") == ["我", "的", "iphone15", "退", "款", "了"]
    assert tokens("カード・ゲーム") == ["カ", "ー", "ド", "ゲ", "ー", "ム"]  # ・ is punctuation
    assert tokens("Don't foo_bar 3.5 한국어") == ["don", "t", "foo", "bar", "3", "5", "한국어"]
    assert tokens("İSTANBUL ΟΔΟΣ") == ["istanbul", "οδοσ"]  # one character at a time, as Lucene
    assert tokens("x" * 300) == ["x" * 255]


def test_query_terms_and_the_fts_query() -> None:
    assert query_terms('退款 "my order" iPhone退款 !!!') == ["退 款", "my order", "iphone 退 款"]
    assert fts_query('退款 "my order" OR') == '"退 款" AND "my order" AND "or"'
    assert fts_query("!!! ...") == ""
    assert index_text("Plain ASCII stays, as FTS5's ascii tokenizer splits it") == (
        "Plain ASCII stays, as FTS5's ascii tokenizer splits it"
    )
    assert index_text("您的iPhone，退款") == "您 的 iphone 退 款"
    assert index_text(None) == ""


JAVA = """
import java.io.*; import java.nio.charset.StandardCharsets; import java.util.regex.*;
public class Tokens { public static void main(String[] a) throws Exception {
  BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
  Pattern p = Pattern.compile(in.readLine());
  PrintStream out = new PrintStream(System.out, true, "UTF-8"); String line;
  while ((line = in.readLine()) != null) { Matcher m = p.matcher(line); StringBuilder sb =
    new StringBuilder(); while (m.find()) { StringBuilder low = new StringBuilder();
    m.group().codePoints().forEach(c -> low.appendCodePoint(Character.toLowerCase(c)));
    String s = low.length() > 255 ? low.substring(0, 255) : low.toString();
    if (sb.length() > 0) sb.append('\\u0001'); sb.append(s); } out.println(sb); } } }
"""
POOLS = [range(0x20, 0x7F), range(0x3000, 0x3100), range(0x4E00, 0x4E40), range(0xFF00, 0xFFA0),
         range(0xAC00, 0xAC10), range(0xC0, 0x250), range(0x370, 0x400), range(0x300, 0x370),
         range(0x20000, 0x20010), range(0x2E80, 0x2EA0), range(0x3400, 0x3410),
         range(0x660, 0x66A)]  # fmt: skip
BREAKS = str.maketrans(dict.fromkeys("\n\r\x85\u2028\u2029\x0b\x0c\x1c\x1d\x1e", " "))


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
def test_the_elasticsearch_pattern_tokenizes_as_python_does(tmp_path: Path) -> None:
    """Elasticsearch's pattern tokenizer runs java.util.regex and Lucene lowercases per code
    point: the same texts through Java give the same tokens."""
    rng = random.Random(7)
    texts = ["我要申请退款 iPhone退款了, don't Café カード・ゲーム ｶｰﾄﾞ İstanbul ΟΔΟΣ", "x" * 300]
    for _ in range(2000):
        texts.append("".join(chr(rng.choice(rng.choice(POOLS))) for _ in range(rng.randint(1, 40))))
    texts = [t.translate(BREAKS) for t in texts]
    source = tmp_path / "Tokens.java"
    source.write_text(JAVA)
    done = subprocess.run(
        ["java", str(source)], input="\n".join([JAVA_PATTERN, *texts]).encode() + b"\n",
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    lines = done.stdout.decode().split("\n")
    for text, line in zip(texts, lines, strict=False):
        assert (line.split("\x01") if line else []) == tokens(text), text
