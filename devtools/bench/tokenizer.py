"""`tokenpulse bench tokenizer`: the in-graph BPE tokenizer's cost, ordinary text vs one long word.

A prompt is cut into words, and merging a word's bytes takes a round per merge; before words
were cut into pieces of `bpe.MAX_WORD_BYTES`, one word of L bytes cost L rounds of O(L), and a
run of spaces is one word (20,000 spaces: 21.9 CPU-s on this 2-core machine). This bench trains
the preset's vocabulary on its own text, as `model build` does, then tokenizes, at each size,
ordinary text and inputs that are one word however long (whitespace runs, a Latin run with no
space, Chinese with no punctuation, emoji joined by zero-width joiners). Per input it prints CPU
seconds, MB/s, the ratio to ordinary text of the same size, and how the cost grows from one size
to the next (about 10 for a tenfold size where the cost is linear). It checks each input's ids
against the training encoder (the `tokenizers` package) and counts where they differ.

Measured here (`default` preset, 1 MB each, 2 shared cores): see the README's model section.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from devtools.bench.harness import progress
from serving.model.config import PRESETS, get_preset

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000, 20_000)
# one word each, however long: what the split pattern cannot cut
WORDS = {
    "spaces": " ",
    "newlines-tabs": "\n\t\t",
    "latin-run": "Tokenpulse",
    "chinese-run": "您好我想查询订单状态",
    "emoji-zwj": "\U0001f468\u200d\U0001f469\u200d\U0001f467",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    parser.add_argument("--preset", default="default", choices=sorted(PRESETS))
    parser.add_argument("--quick", action="store_true", help="2 KB and 20 KB, tiny (tests)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def inputs(size: int, ordinary: str) -> dict[str, str]:
    """Each input of about `size` bytes: ordinary text, then each one-word kind."""
    raw = ordinary.encode() * (size // max(1, len(ordinary.encode())) + 1)
    out = {"ordinary": raw[:size].decode(errors="ignore")}  # a cut character is dropped
    for name, unit in WORDS.items():
        out[name] = unit * (size // len(unit.encode()))
    return out


def measure(encode: Any, reference: Any, texts: dict[str, str]) -> dict[str, dict[str, Any]]:
    """CPU seconds and MB/s per input (best of two), and whether the ids equal `reference`'s."""
    import tensorflow as tf

    rows = {}
    for name, text in texts.items():
        best, ids = float("inf"), []
        for _ in range(2):
            start = time.process_time()
            ids = encode(tf.constant([text])).to_list()[0]
            best = min(best, time.process_time() - start)
        size = len(text.encode())
        rows[name] = {
            "bytes": size,
            "tokens": len(ids),
            "cpu_s": round(best, 4),
            "mb_per_s": round(size / 1e6 / max(best, 1e-6), 2),
            "same_as_training_encoder": ids == reference.encode([text])[0].tolist(),
        }
    ordinary = rows["ordinary"]["cpu_s"]
    for row in rows.values():
        row["vs_ordinary"] = round(row["cpu_s"] / max(ordinary, 1e-6), 2)
    return rows


def main(args: argparse.Namespace) -> int:
    """Train the vocabulary, tokenize every input at every size, report."""
    import tensorflow as tf

    from serving.model import bpe, data, tokenizer

    say = progress("tokenizer")
    preset = get_preset("tiny" if args.quick else args.preset)
    sizes = QUICK_SIZES if args.quick else SIZES
    say(f"training the {preset.name} preset's vocabulary ({preset.model.vocab_size} ids)")
    texts = data.corpus(preset.train)
    spec = bpe.train(texts, preset.model.vocab_size)
    encode = tf.function(
        tokenizer.bpe_vocab(spec).encode, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    encode(tf.constant(["a warm-up call traces the graph"]))
    reference = bpe.Encoder(spec)
    ordinary = "\n".join(texts[:50])
    by_size = {}
    for size in sizes:
        say(f"tokenizing {len(WORDS) + 1} inputs of {size} bytes")
        by_size[size] = measure(encode, reference, inputs(size, ordinary))
    small, large = by_size[sizes[-2]], by_size[sizes[-1]]
    growth = {k: round(large[k]["cpu_s"] / max(small[k]["cpu_s"], 1e-6), 2) for k in large}
    report = {
        "preset": preset.name,
        "max_word_bytes": bpe.MAX_WORD_BYTES,
        "sizes": list(sizes),
        "results": {str(size): rows for size, rows in by_size.items()},
        "growth": {"from": sizes[-2], "to": sizes[-1], "cpu_ratio": growth},
        "differ": sum(
            not r["same_as_training_encoder"] for rows in by_size.values() for r in rows.values()
        ),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0


def _print_table(report: dict[str, Any]) -> None:
    print(f"in-graph BPE tokenizer, {report['preset']} vocabulary, words cut at "
          f"{report['max_word_bytes']} bytes")  # fmt: skip
    for size, rows in report["results"].items():
        print(f"\n{int(size):,} bytes   cpu_s     MB/s  vs ordinary  tokens  same ids")
        for name, r in rows.items():
            print(f"  {name:14s} {r['cpu_s']:8.4f} {r['mb_per_s']:8.2f} {r['vs_ordinary']:10.2f}x"
                  f" {r['tokens']:7d}  {r['same_as_training_encoder']}")  # fmt: skip
    grow = report["growth"]
    print(f"\ncost growth from {grow['from']:,} to {grow['to']:,} bytes "
          f"({grow['to'] / grow['from']:.0f}x the bytes; linear is about that):")  # fmt: skip
    for name, ratio in grow["cpu_ratio"].items():
        print(f"  {name:14s} {ratio:.2f}x")
    print(f"\ninputs whose ids differ from the training encoder's: {report['differ']}")
