"""`tokenpulse bench redaction`: recall and false positives per kind on an independent corpus.

The corpus (`devtools.dialogues`) is Chinese and English customer-service dialogues, written
apart from the patterns: seeded ones carry personal data and secrets of every kind, clean ones
only near-misses (order, tracking and invoice numbers, dates, versions, amounts). A seeded value
counts as found when every part of it that must go is gone from the redacted text (whatever
label replaced it); a clean dialogue is a false positive when redaction changes it at all.
Prints, per kind, the values seeded, found and the recall, the false-positive rate, and the cost
in microseconds per text against the redaction before issue 18 (`redact_before`), scored on the
same corpus. Targets: recall >= 99 % per kind, false positives <= 0.5 % of clean dialogues.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from devtools.bench import redact_before
from devtools.bench.harness import median_time, progress
from devtools.corpus import clean_corpus, pii_corpus
from devtools.dialogues import SEED_KINDS, Dialogue, clean_dialogues, seeded_dialogues
from log_pipeline.redaction import text as redact_now

Redact = Callable[[str], tuple[str, Counter[str]]]
RECALL_TARGET = 0.99
FP_TARGET = 0.005
_progress = progress("redaction")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    parser.add_argument("--seeded", type=int, default=6000, help="seeded dialogues")
    parser.add_argument("--clean", type=int, default=4000, help="clean dialogues")
    parser.add_argument("--seed", type=int, default=18, help="corpus seed")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (median)")
    parser.add_argument("--show-misses", type=int, default=3, help="misses shown per kind")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


@dataclass
class Score:
    """What one redactor did to the corpus."""

    seeded: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    missed: dict[str, list[str]] = field(default_factory=dict)
    clean: int = 0
    false_positive: int = 0
    fp_kinds: Counter[str] = field(default_factory=Counter)
    fp_examples: list[str] = field(default_factory=list)

    def recall(self, kind: str) -> float:
        """Found over seeded (1.0 when nothing was seeded)."""
        return self.found[kind] / self.seeded[kind] if self.seeded[kind] else 1.0

    @property
    def fp_rate(self) -> float:
        """Clean dialogues changed, over clean dialogues."""
        return self.false_positive / self.clean if self.clean else 0.0

    def meets_targets(self) -> bool:
        """Recall >= 99 % for every kind and false positives <= 0.5 %."""
        return all(self.recall(k) >= RECALL_TARGET for k in SEED_KINDS) and (
            self.fp_rate <= FP_TARGET
        )


def score(redact: Redact, seeded: Sequence[Dialogue], clean: Sequence[Dialogue]) -> Score:
    """Run `redact` over the corpus and count what it found and what it wrongly changed."""
    result = Score()
    for dialogue in seeded:
        out, _ = redact(dialogue.text)
        for planted in dialogue.seeded:
            kind = planted.value.kind
            result.seeded[kind] += 1
            if any(part in out for part in planted.value.vanishing()):
                result.missed.setdefault(kind, []).append(
                    f"{planted.value.variant}: {planted.value.text!r}"
                )
            else:
                result.found[kind] += 1
    for dialogue in clean:
        out, counts = redact(dialogue.text)
        result.clean += 1
        if out != dialogue.text:
            result.false_positive += 1
            result.fp_kinds.update(counts)
            result.fp_examples.append(out)
    return result


def _timing(redact: Redact, texts: list[str], repeats: int) -> float:
    """Median microseconds per text."""

    def run() -> None:
        for text in texts:
            redact(text)

    return median_time(run, repeats) / len(texts) * 1e6


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Score and time both redactors on one corpus."""
    _progress(f"building {args.seeded} seeded and {args.clean} clean dialogues")
    seeded = seeded_dialogues(args.seed, args.seeded)
    clean = clean_dialogues(args.seed + 1, args.clean)
    now, before = redact_now.redact, redact_before.redact
    _progress("scoring")
    after_score, before_score = score(now, seeded, clean), score(before, seeded, clean)
    sets = {
        "dialogues": [d.text for d in seeded[:500]] + [d.text for d in clean[:500]],
        "clean_dialogues": [d.text for d in clean[:1000]],
        "shape_corpus": [t.text for t in pii_corpus(seed=5, size=500)]
        + clean_corpus(seed=6, size=500),
        "plain_prompts": [
            f"Write a short poem about the sea, number {i} of a series" for i in range(1000)
        ],
    }
    _progress("timing")
    timing = {
        name: {
            "before_us": _timing(before, texts, args.repeats),
            "after_us": _timing(now, texts, args.repeats),
        }
        for name, texts in sets.items()
    }
    return {
        "corpus": {
            "seeded_dialogues": len(seeded),
            "clean_dialogues": len(clean),
            "seed": args.seed,
        },
        "kinds": {
            kind: {
                "seeded": after_score.seeded[kind],
                "found": after_score.found[kind],
                "recall": after_score.recall(kind),
                "recall_before": before_score.recall(kind),
                "missed": after_score.missed.get(kind, [])[: args.show_misses],
            }
            for kind in SEED_KINDS
        },
        "false_positives": {
            "clean": after_score.clean,
            "changed": after_score.false_positive,
            "rate": after_score.fp_rate,
            "rate_before": before_score.fp_rate,
            "by_kind": dict(after_score.fp_kinds),
            "examples": after_score.fp_examples[: args.show_misses],
        },
        "timing": timing,
        "targets_met": after_score.meets_targets(),
    }


def _print(r: dict[str, Any]) -> None:
    c = r["corpus"]
    print(
        f"corpus: {c['seeded_dialogues']} seeded + {c['clean_dialogues']} clean dialogues "
        f"(zh/en, seed {c['seed']})"
    )
    print(f"{'kind':<16}{'seeded':>8}{'found':>8}{'recall':>9}{'before':>9}")
    for kind, k in r["kinds"].items():
        flag = "" if k["recall"] >= RECALL_TARGET else "  < target"
        print(
            f"{kind:<16}{k['seeded']:>8}{k['found']:>8}{k['recall']:>9.2%}"
            f"{k['recall_before']:>9.2%}{flag}"
        )
        for miss in k["missed"]:
            print(f"    missed {miss}")
    fp = r["false_positives"]
    print(
        f"false positives: {fp['changed']} of {fp['clean']} clean dialogues = {fp['rate']:.2%} "
        f"(before {fp['rate_before']:.2%}; target <= {FP_TARGET:.1%})"
    )
    if fp["by_kind"]:
        print(f"    by kind: {fp['by_kind']}")
    for example in fp["examples"]:
        print(f"    changed: {example[:300]!r}")
    print(f"{'cost per text':<18}{'before µs':>11}{'after µs':>11}{'ratio':>8}")
    for name, t in r["timing"].items():
        print(
            f"{name:<18}{t['before_us']:>11.1f}{t['after_us']:>11.1f}"
            f"{t['after_us'] / t['before_us']:>8.2f}"
        )
    print(f"targets met (recall >= 99 % per kind, FP <= 0.5 %): {r['targets_met']}")


def main(args: argparse.Namespace) -> int:
    """Run the bench and print its figures."""
    result = measure(args)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        _print(result)
    sys.stdout.flush()
    return 0
