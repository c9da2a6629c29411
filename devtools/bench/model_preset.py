"""`tokenpulse bench model --preset-dir DIR`: an imported keras_hub preset against keras_hub itself.

The same weights on both sides: the preset imported into our contract (`tokenpulse model import
keras-hub`, into a temporary base path unless `--export` names an import of DIR made earlier),
its SavedModel loaded in this process and called through `serving_default` as TF Serving calls
it (the tokenizer in the graph; greedy, `ignore_eos`), against `CausalLM.from_preset(DIR)`'s own
`generate` compiled with XLA (`jit_compile=True`, its greedy sampler, no stop token), fed the
same prompt's token ids. Batch 1, 8 and 32 are timed in turns in one run (model.py's harness),
then the decode cost per step early and late in the window, which separates the per-step cost
from the prefill.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from devtools.bench.generation import (
    BATCH_SIZES,
    NEW_TOKENS,
    PROMPT_LEN,
    Runner,
    decode_cost,
    throughput,
)
from devtools.bench.harness import progress
from stack.up.files import imported_from, recorded_context

PROMPT_WORD = " a"  # one token in GPT-2's byte-level BPE, so N of them make an N-token prompt
# Why the export is slower where it is (measured: see the README's "Bring your own model").
LIMITS = (
    "the export is a plain graph of core ops, so that stock TF Serving runs it, with no XLA "
    "cluster: one decode step schedules every node of the loop's body (the figure below) one "
    "kernel at a time, each at a fixed cost, where keras_hub's loop is compiled by XLA, which "
    "fuses them. That overhead is most of a step for a small model at batch 1 and shrinks as the "
    "batch and the width grow and the matmuls dominate. The export also tokenizes and "
    "detokenizes in the graph, which keras_hub is spared here (it is fed token ids)"
)


class BenchError(RuntimeError):
    """The preset cannot be benchmarked as asked (the message says why)."""


def _imported(preset_dir: Path, export: Path | None, base: Path) -> Path:
    """An import of PRESET_DIR: the given one (it must name that preset), or a fresh one."""
    if export is not None:
        source = imported_from(export)
        if source != preset_dir.resolve():
            was = f"an import of {source}" if source else "no import"
            raise BenchError(f"{export} is not an import of {preset_dir}: it is {was}")
        return export
    from serving.model.hub.importer import run_import
    from serving.model.settings import ImportSettings

    settings = ImportSettings(
        source="keras-hub",
        model_name="gen",
        preset_dir=preset_dir,
        base_path=base,
        version=1,
        warmup_batch_sizes=[1],
        batching_parameters_file=None,
    )
    return Path(str(run_import(settings)["path"]))


def decode_step_nodes(export: Path) -> int:
    """Graph nodes in the body of the export's decode loop (its largest `while` body): the
    kernels one decode step schedules, each with a fixed cost that XLA's fusion would save."""
    from tensorflow.core.protobuf import saved_model_pb2

    model = saved_model_pb2.SavedModel()
    model.ParseFromString((export / "saved_model.pb").read_bytes())
    library = model.meta_graphs[0].graph_def.library.function
    bodies = [len(f.node_def) for f in library if "while_body" in f.signature.name]
    return max(bodies, default=0)


def export_runner(export: Path) -> Runner:
    """The export's `serving_default`, loaded in process with TF.Text's ops registered."""
    import tensorflow as tf

    from tokenpulse.tfserving.ops import load_saved_model
    from tokenpulse.tfserving.signature import SIGNATURE_NAME, STOP_SLOTS

    serve = load_saved_model(export).signatures[SIGNATURE_NAME]

    def generate(batch: int, prompt_len: int, new_tokens: int) -> None:
        out = serve(
            prompt=tf.constant([PROMPT_WORD * prompt_len] * batch),
            max_new_tokens=tf.fill([batch], new_tokens),
            temperature=tf.zeros([batch]),
            top_k=tf.zeros([batch], tf.int32),
            top_p=tf.ones([batch]),
            seed=tf.zeros([batch], tf.int64),
            stop=tf.fill([batch, STOP_SLOTS], ""),
            ignore_eos=tf.ones([batch], tf.int32),  # random weights: time full lengths
        )
        produced = int(tf.reduce_min(out["output_tokens"]))
        if produced != new_tokens:
            raise BenchError(f"expected {new_tokens} tokens, got {produced}")

    return Runner("tokenpulse export", generate)


def keras_hub_runner(preset_dir: Path) -> Runner:
    """keras_hub's own `generate` on the preset (XLA on, greedy)."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras_hub
    import numpy as np

    lm = keras_hub.models.CausalLM.from_preset(str(preset_dir))
    tokenizer = lm.preprocessor.tokenizer
    lm.preprocessor = None  # fed token ids, as the export's graph makes them
    lm.compile(sampler="greedy", jit_compile=True)

    def generate(batch: int, prompt_len: int, new_tokens: int) -> None:
        prompt = np.asarray(tokenizer(PROMPT_WORD * prompt_len))
        if prompt.shape != (prompt_len,):
            raise BenchError(f"{PROMPT_WORD!r} x {prompt_len} is {prompt.shape[0]} tokens here")
        ids = np.zeros((batch, prompt_len + new_tokens), dtype="int32")
        ids[:, :prompt_len] = prompt
        mask = np.zeros(ids.shape, dtype=bool)
        mask[:, :prompt_len] = True
        lm.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)

    return Runner("keras_hub generate (XLA)", generate)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Import (or take the given import), then time both side by side."""
    say = progress("model", quiet=args.json)
    with tempfile.TemporaryDirectory(prefix="bench-preset-") as tmp:
        if args.export is None:
            say(f"importing {args.preset_dir}")
        export = _imported(args.preset_dir, args.export, Path(tmp) / "gen")
        ours, nodes = export_runner(export), decode_step_nodes(export)
        peer, context = keras_hub_runner(args.preset_dir), recorded_context(export)
        new_tokens = min(NEW_TOKENS, context - PROMPT_LEN - 2)  # the window bounds the run
        runners = [ours, peer]
        tps = throughput(runners, PROMPT_LEN, new_tokens, args.repeats, say)
        costs = decode_cost(runners, context, args.repeats, say)
    ratio = {
        f"tokens_per_s_batch{n}": round(tps[ours.name][n] / tps[peer.name][n], 2)
        for n in BATCH_SIZES
    }
    return {
        "preset_dir": str(args.preset_dir),
        "export": str(args.export) if args.export else "imported into a temporary directory",
        "context": context,
        "prompt_len": PROMPT_LEN,
        "new_tokens": new_tokens,
        "runs": {r.name: {"tokens_per_s": tps[r.name], **costs[r.name]} for r in runners},
        "export_decode_step_graph_nodes": nodes,
        "ratio_export_over_keras_hub": ratio,
        "limits": LIMITS if min(ratio.values()) < 1 else None,
    }


def main(args: argparse.Namespace) -> int:
    """Print the figures side by side (or JSON); one error line when the bench cannot run."""
    from serving.model.hub.preset import PresetError, check_preset

    try:
        check_preset(args.preset_dir)
        report = run(args)
    except (PresetError, BenchError, OSError, ValueError) as exc:
        print(f"bench model: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"preset {report['preset_dir']} (window {report['context']}): prompt "
          f"{report['prompt_len']} tokens, {report['new_tokens']} new, greedy")  # fmt: skip
    for name, r in report["runs"].items():
        tps = ", ".join(f"b{k}={v:.0f}" for k, v in r["tokens_per_s"].items())
        print(
            f"{name:>26}: tokens/s {tps}; decode ms/step at b8 early "
            f"{r['decode_ms_per_step_early']} late {r['decode_ms_per_step_late']}"
        )
    ratios = ", ".join(f"{k} {v}x" for k, v in report["ratio_export_over_keras_hub"].items())
    print(f"export / keras_hub: {ratios}")
    print(
        f"graph nodes in one decode step of the export: {report['export_decode_step_graph_nodes']}"
    )
    if report["limits"]:
        print(f"where the export is slower: {report['limits']}")
    return 0
