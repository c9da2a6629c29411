"""`tokenpulse bench model`: generation speed, KV-cache scaling and FLOP/s vs keras_hub GPT-2.

keras_hub runs twice, its generate loop with XLA and without (keras_hub_peer says why each is
named). The models get the same dimensions and random weights (speed does not depend on the weights;
the end-of-text logit is pushed down in ours so no row stops early). Every figure is measured in
this one run, side by side, including the matmul peak the FLOP/s are compared against: the
models take turns call by call, so load from elsewhere on the machine hits all alike. A
grouped-query preset also runs with keras_hub's multi-head attention (`multi_head`), so the
ratios against keras_hub show the loop on the same arithmetic beside the preset as shipped.
The TokenPulse run also reports how many kernels one decode step runs in the exported SavedModel.
keras_hub is an optional extra (`pip install 'tokenpulse[bench-model]'`); without it the bench
says so and measures the TokenPulse side only. `--preset-dir DIR` benches an imported keras_hub
preset against keras_hub itself instead (model_preset.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from devtools.bench import model_preset
from devtools.bench.generation import (
    BATCH_SIZES,
    NEW_TOKENS,
    PROMPT_LEN,
    Runner,
    decode_cost,
    throughput,
)
from devtools.bench.harness import median_time, progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the model benchmark."""
    parser.add_argument("--preset", default="default", help="model dimensions to benchmark")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed runs per figure (median); decode cost: 4 x repeats + 1 pairs (1 for 1)",
    )
    parser.add_argument(
        "--no-peer",
        dest="peer",
        action="store_false",
        help="skip the keras_hub GPT2CausalLM comparison (needs the bench-model extra)",
    )
    parser.add_argument(
        "--preset-dir",
        type=Path,
        default=None,
        help="instead: a keras_hub causal-LM preset, imported into our contract, against "
        "keras_hub's own generate (XLA on) on the same weights (devtools/bench/model_preset.py)",
    )
    parser.add_argument(
        "--export",
        type=Path,
        default=None,
        help="with --preset-dir: an import of it made earlier (a version directory), so the "
        "bench does not import it again",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(".cache/tokenpulse"),
        help="where `model build` cached the preset's trained checkpoint (held-out figures)",
    )


def _matmul_peak(repeats: int) -> float:
    """FLOP/s of a large float32 matmul on this machine, now."""
    import tensorflow as tf

    n = 1024
    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n])
    fn = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    return 2 * n**3 / median_time(lambda: fn().numpy(), max(repeats, 5))


def flops_per_token(cfg: Any, attended: float) -> float:
    """Useful FLOPs to decode one token: weight matmuls, tied head, attention over `attended`."""
    d, layers = cfg.d_model, cfg.n_layers
    weights = layers * (d * (d + 2 * cfg.kv_dim) + d * d + 2 * d * cfg.d_ff)
    return 2 * weights + 2 * cfg.vocab_size * d + 4 * layers * d * attended


def ours(cfg: Any, name: str = "tokenpulse", count_ops: bool = True) -> Runner:
    """TokenPulse's in-graph generator (`count_ops`: it also counts one decode step's kernels)."""
    import tensorflow as tf

    from serving.model.generate import Generator
    from serving.model.tokenizer import BYTE_EOT_ID, byte_vocab
    from serving.model.transformer import GPT
    from tokenpulse.tfserving.signature import STOP_SLOTS

    model = GPT(cfg, seed=0)
    model.lnf_b.assign(-10.0 * model.wte[BYTE_EOT_ID])  # never stop early: we time full lengths
    # byte ids in the model's vocabulary size: a prompt of n letters is n tokens, as keras_hub's
    gen = Generator(model, byte_vocab(cfg.vocab_size))

    def generate(batch: int, prompt_len: int, new_tokens: int) -> None:
        out = gen.serve(
            prompt=tf.constant(["a" * prompt_len] * batch),
            max_new_tokens=tf.fill([batch], new_tokens),
            temperature=tf.zeros([batch]),
            top_k=tf.zeros([batch], tf.int32),
            top_p=tf.ones([batch]),
            seed=tf.zeros([batch], tf.int64),
            stop=tf.fill([batch, STOP_SLOTS], ""),  # no stop sequences: we time full lengths
            ignore_eos=tf.zeros([batch], tf.int32),
        )
        produced = int(tf.reduce_min(out["output_tokens"]))
        if produced != new_tokens:
            raise RuntimeError(f"expected {new_tokens} tokens, got {produced}")

    def ops_per_step() -> dict[str, float]:
        from devtools.opcount import ops_per_decode_step
        from serving.model import session
        from tokenpulse.tfserving.signature import SIGNATURE_NAME

        with tempfile.TemporaryDirectory() as export_dir:
            signatures = {SIGNATURE_NAME: gen.serve.get_concrete_function()}
            tf.saved_model.save(gen, export_dir, signatures=signatures)
            with session.load(Path(export_dir)) as loaded:
                return {
                    f"{kind}_batch1": ops_per_decode_step(loaded, ["a"], temp)["total"]
                    for kind, temp in (("greedy", 0.0), ("sampled", 0.8))
                }

    return Runner(name, generate, ops_per_step if count_ops else None)


def multi_head(cfg: Any) -> Runner | None:
    """Ours with keras_hub's attention, every query head its own keys and values, beside a
    grouped-query preset: the speed ratio against keras_hub compares the loops on the same
    arithmetic, not the attention the preset chose. None for a multi-head preset."""
    if cfg.n_kv_heads == cfg.n_heads:
        return None
    return ours(replace(cfg, n_kv_heads=cfg.n_heads), "tokenpulse multi-head", count_ops=False)


def keras_hub_peer(cfg: Any, xla: bool) -> Runner:
    """keras_hub's GPT2CausalLM at the same dimensions, random weights, greedy sampler, its
    generate loop compiled by XLA or not. Said explicitly: Keras's default ("auto") turns XLA
    off on a machine without a GPU and on where there is one, so an unnamed peer would be a
    different peer per machine."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras_hub
    import numpy as np

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=cfg.vocab_size,
        num_layers=cfg.n_layers,
        num_heads=cfg.n_heads,
        hidden_dim=cfg.d_model,
        intermediate_dim=cfg.d_ff,
        max_sequence_length=cfg.context,
    )
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy", jit_compile=xla)

    def generate(batch: int, prompt_len: int, new_tokens: int) -> None:
        total = prompt_len + new_tokens
        ids = np.full((batch, total), 97, dtype="int32")
        mask = np.zeros((batch, total), dtype=bool)
        mask[:, :prompt_len] = True
        lm.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)

    return Runner(f"keras_hub GPT2CausalLM ({'XLA' if xla else 'no XLA'})", generate)


def measure(
    runners: list[Runner], cfg: Any, repeats: int, say: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """Per runner: tokens/s per batch size, decode cost late vs early in the window, FLOP/s."""
    new_tokens = min(NEW_TOKENS, cfg.context - PROMPT_LEN - 2)  # the window bounds the run
    tps = throughput(runners, PROMPT_LEN, new_tokens, repeats, say)
    costs = decode_cost(runners, cfg.context, repeats, say)
    attended = PROMPT_LEN + new_tokens / 2
    results: dict[str, dict[str, Any]] = {}
    for runner in runners:
        result: dict[str, Any] = {
            "new_tokens": new_tokens, "prompt_len": PROMPT_LEN, "tokens_per_s": tps[runner.name],
            **costs[runner.name],
        }  # fmt: skip
        flops = flops_per_token(cfg, attended) * result["tokens_per_s"][32]
        result["achieved_flop_per_s_batch32"] = round(flops)
        if runner.ops_per_step is not None:
            say(f"{runner.name}: kernels per decode step")
            result["ops_per_decode_step"] = runner.ops_per_step()
        results[runner.name] = result
    return results


def held_out(preset_name: str, cache_dir: Path) -> dict[str, float] | str:
    """Bits per token and per byte of the preset's trained checkpoint on held-out text (bits per
    byte compares across tokenizers: the byte-level model's bits per token were per byte)."""
    import numpy as np

    from serving.model import data, train
    from serving.model.config import get_preset
    from serving.model.transformer import GPT

    preset = get_preset(preset_name)
    model = GPT(preset.model)
    cached = train.load_cached(model, cache_dir, preset)
    if cached is None:
        return f"no trained {preset_name} checkpoint in {cache_dir}: `tokenpulse model build` first"
    spec = cached[1]
    held = data.split(train.prepare(preset, spec)[1])[1]
    cfg = preset.train
    figures = train.held_out(
        model, held, spec, cfg.eval_batches, cfg.eval_batch_size, np.random.default_rng(0)
    )
    return {
        "bits_per_token": round(figures.bits_per_token, 4),
        "bytes_per_token": round(figures.bytes_per_token, 4),
        "bits_per_byte": round(figures.bits_per_byte, 4),
    }


KERAS_HUB_MISSING = (
    "keras_hub is not installed, so the GPT2CausalLM comparison is skipped; install it with "
    "`pip install 'tokenpulse[bench-model]'` (or pass --no-peer to silence this)"
)


def main(args: argparse.Namespace) -> int:
    """Run every measurement and print a table (or JSON)."""
    if args.preset_dir is not None:
        return model_preset.main(args)
    if args.export is not None:
        print("bench model: error: --export goes with --preset-dir", file=sys.stderr)
        return 2
    from serving.model.config import get_preset

    cfg = get_preset(args.preset).model
    say = progress("model", quiet=args.json)
    say("matmul peak")
    peak = _matmul_peak(args.repeats)
    report: dict[str, Any] = {
        "preset": args.preset,
        "model": vars(cfg) | {"d_ff": cfg.d_ff},
        "matmul_peak_flop_per_s": round(peak),
        "runs": {},
    }
    peers: list[Runner] = []
    if args.peer:
        try:
            peers = [keras_hub_peer(cfg, xla=False), keras_hub_peer(cfg, xla=True)]
        except ModuleNotFoundError as exc:
            if exc.name != "keras_hub":
                raise
            print(f"bench model: {KERAS_HUB_MISSING}", file=sys.stderr)
            report["keras_hub"] = KERAS_HUB_MISSING
    runners = [ours(cfg)]
    if peers and (same := multi_head(cfg)) is not None:
        runners.append(same)
    mine = list(runners)
    runners += peers
    for name, figures in measure(runners, cfg, args.repeats, say).items():
        figures["fraction_of_matmul_peak"] = round(figures["achieved_flop_per_s_batch32"] / peak, 4)
        report["runs"][name] = figures
    if peers:  # per arm of ours (the preset; with keras_hub's attention), per keras_hub peer
        report["ratio_tokenpulse_over_keras_hub"] = {
            arm.name: {peer.name: _ratios(report["runs"], arm, peer) for peer in peers}
            for arm in mine
        }
    say("held-out text")
    report["held_out"] = held_out(args.preset, args.cache_dir)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0


def _ratios(runs: dict[str, dict[str, Any]], arm: Runner, peer: Runner) -> dict[str, float]:
    ours_, theirs = runs[arm.name]["tokens_per_s"], runs[peer.name]["tokens_per_s"]
    return {f"tokens_per_s_batch{n}": round(ours_[n] / theirs[n], 2) for n in BATCH_SIZES}


def _print_table(report: dict[str, Any]) -> None:
    print(f"preset {report['preset']}: {report['model']}")
    print(f"matmul peak: {report['matmul_peak_flop_per_s'] / 1e9:.1f} GFLOP/s")
    for name, r in report["runs"].items():
        tps = ", ".join(f"b{k}={v:.0f}" for k, v in r["tokens_per_s"].items())
        print(
            f"{name:>24}: tokens/s {tps}; decode ms/step early {r['decode_ms_per_step_early']}"
            f" late {r['decode_ms_per_step_late']} (late/early {r['late_over_early']});"
            f" {r['achieved_flop_per_s_batch32'] / 1e9:.2f} GFLOP/s at b32"
            f" = {100 * r['fraction_of_matmul_peak']:.1f}% of peak"
        )
        if "ops_per_decode_step" in r:
            ops = ", ".join(f"{k} {v:.0f}" for k, v in r["ops_per_decode_step"].items())
            print(f"{name:>24}: kernels per decode step: {ops}")
    for arm, by_peer in report.get("ratio_tokenpulse_over_keras_hub", {}).items():
        for peer, ratios in by_peer.items():
            print(f"{arm} / {peer}: " + ", ".join(f"{k} {v}x" for k, v in ratios.items()))
    held = report["held_out"]
    if isinstance(held, dict):
        print(
            f"held-out text: {held['bits_per_token']} bits per token, {held['bits_per_byte']} "
            f"bits per byte ({held['bytes_per_token']} bytes per token)"
        )
    else:
        print(f"held-out text: {held}")
