"""`tokenpulse bench stops`: a stop sequence that ends decoding in the graph vs trimming after it.

One model server, batching on (as deployed), one request at a time. The same few-shot requests
(`Q: ...\\nA: ...` lines, stop "\\n", a large max_tokens, the same seeds) run two ways, in turns
so drift on the host hits both alike:
- `in-graph`: the `stop` input carries "\\n"; the model ends the row at the newline and returns
  the text before it.
- `trimmed`: no stop input; the model decodes to its length cap (or end-of-text), and the text is
  cut at the first "\\n" afterwards, as the gateway did before the model took `stop`.
Both return the same text (the bench counts the requests where they differ: it should be none);
per mode it prints latency, tokens generated, and the ratios trimmed / in-graph. The model caps a
request's new tokens at what its window leaves after the prompt (`serving/model/generate.py`
`_budgets`), which it reports as `cap`.

Measured here (the `tiny` test model, whose 64-token window caps these requests at 32 new tokens;
24 requests per mode at temperature 0.8; two shared cores under other test runs): in-graph 24.4
tokens per request (12 of 24 ended by the newline, the rest at the cap), trimmed 32.0; mean
latency 80.5 ms against 148.8 ms (1.85x), p50 56.0 against 102.0 ms (1.82x), 1.31x the tokens
generated; the same text in 24 of 24 requests. The `default` preset leaves about 90 new tokens
after these prompts, so its trimmed mode decodes about three times as far.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from devtools.bench.harness import add_model_arguments, latency_ms, progress
from stack.launch import running_modelserver
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.predict import parse_predictions, predict_path, row_request

# short few-shot prompts: the default model's window (128 tokens) keeps room to decode
SHOTS = ["Q: 2+2?\nA: 4\n", "Q: 3+5?\nA: 8\n", "Q: 6+1?\nA: 7\n", "Q: 9-4?\nA: 5\n"]
QUESTIONS = ["1+1", "7-2", "4+4", "8-3", "2+5", "6-6", "3+3", "9-1"]
STOP = "\n"
MODES = ("in-graph", "trimmed")
QUICK = {"requests": 4, "max_new_tokens": 32}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Bench options."""
    add_model_arguments(parser)
    parser.add_argument("--requests", type=int, default=24, help="requests per mode")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="each request's max")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--quick", action="store_true", help="4 requests of 32 tokens (tests)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def prompt(i: int) -> str:
    """The i-th few-shot prompt: two solved lines, then a question."""
    shots = SHOTS[i % len(SHOTS)] + SHOTS[(i + 1) % len(SHOTS)]
    return f"{shots}Q: {QUESTIONS[i % len(QUESTIONS)]}?\nA:"


def row(i: int, mode: str, max_new_tokens: int, temperature: float) -> dict[str, Any]:
    """The i-th request's row; only `in-graph` carries the stop sequence."""
    r = sig.default_row(prompt(i), max_new_tokens)
    r.update(temperature=temperature, seed=i)
    if mode == "in-graph":
        r["stop"] = sig.stop_slots([STOP])
    return r


def trim(text: str) -> str:
    """The text before the first stop sequence (the gateway's cut of a whole answer)."""
    return text.split(STOP, 1)[0]


@dataclass
class Mode:
    """One mode's requests."""

    name: str
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    stopped_at_stop: int = 0


def call(url: str, r: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One unary predict; (the row's outputs, seconds)."""
    body = json.dumps(row_request([r], sig.SIGNATURE_NAME)).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        doc = json.loads(resp.read())
    seconds = time.perf_counter() - start
    (pred,) = parse_predictions(doc, 1)
    return pred, seconds


def measure(rest_url: str, model: str, args: argparse.Namespace) -> dict[str, Mode]:
    """Every request in both modes, the mode order alternating per request."""
    url = rest_url + predict_path(model)
    modes = {name: Mode(name) for name in MODES}
    say = progress("stops")
    for name in MODES:  # one untimed call each: tracing and first-call allocations
        call(url, row(0, name, args.max_new_tokens, args.temperature))
    for i in range(args.requests):
        order = MODES if i % 2 == 0 else MODES[::-1]
        for name in order:
            pred, seconds = call(url, row(i, name, args.max_new_tokens, args.temperature))
            mode = modes[name]
            mode.seconds.append(seconds)
            mode.tokens.append(int(pred["output_tokens"]))
            mode.texts.append(pred["text"] if name == "in-graph" else trim(pred["text"]))
            mode.stopped_at_stop += int(pred.get("stop_index", sig.NO_STOP)) >= 0
        if (i + 1) % 8 == 0 or i + 1 == args.requests:
            say(f"{i + 1}/{args.requests} requests per mode")
    return modes


def report(modes: dict[str, Mode], args: argparse.Namespace) -> dict[str, Any]:
    """Per-mode figures and the trimmed / in-graph ratios."""
    rows: list[dict[str, Any]] = []
    for mode in modes.values():
        rows.append(
            {
                "mode": mode.name,
                "requests": len(mode.seconds),
                **latency_ms(mode.seconds),
                "tokens_generated": sum(mode.tokens),
                "tokens_per_request": statistics.fmean(mode.tokens) if mode.tokens else 0.0,
                "max_tokens_per_request": max(mode.tokens, default=0),
                "ended_by_stop": mode.stopped_at_stop,
            }
        )
    graph, trimmed = modes["in-graph"], modes["trimmed"]
    same = sum(a == b for a, b in zip(graph.texts, trimmed.texts, strict=True))

    def ratio(a: float, b: float) -> float:
        return round(a / b, 2) if b else float("nan")

    return {
        "prompt_example": prompt(0),
        "stop": STOP,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "cap": max(trimmed.tokens, default=0),  # the most the window let a request decode
        "results": rows,
        "same_text": same,
        "trimmed_vs_in_graph": {
            "mean_latency": ratio(rows[1]["mean_ms"], rows[0]["mean_ms"]),
            "p50_latency": ratio(rows[1]["p50_ms"], rows[0]["p50_ms"]),
            "tokens_generated": ratio(rows[1]["tokens_generated"], rows[0]["tokens_generated"]),
        },
    }


def _print(doc: dict[str, Any]) -> None:
    print(
        f"few-shot prompt, stop {doc['stop']!r}, max_new_tokens {doc['max_new_tokens']} "
        f"(the window caps a request at {doc['cap']}), temperature {doc['temperature']}"
    )
    print(f"{'mode':<10} {'req':>4} {'mean ms':>9} {'p50 ms':>8} {'p90 ms':>8} "
          f"{'tokens':>7} {'tok/req':>8} {'by stop':>8}")  # fmt: skip
    for r in doc["results"]:
        print(
            f"{r['mode']:<10} {r['requests']:>4} {r['mean_ms']:>9.1f} {r['p50_ms']:>8.1f} "
            f"{r['p90_ms']:>8.1f} {r['tokens_generated']:>7} {r['tokens_per_request']:>8.1f} "
            f"{r['ended_by_stop']:>8}"
        )
    ratios = doc["trimmed_vs_in_graph"]
    print(
        f"trimmed / in-graph: mean latency {ratios['mean_latency']}x, p50 "
        f"{ratios['p50_latency']}x, tokens generated {ratios['tokens_generated']}x; "
        f"same text in {doc['same_text']}/{doc['results'][0]['requests']} requests"
    )


def main(args: argparse.Namespace) -> int:
    """Start the model server, run both modes, report."""
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if not args.model_base_path.is_dir():
        print(
            f"no model at {args.model_base_path}; build one (`make model`) or pass "
            "--model-base-path",
            file=sys.stderr,
        )
        return 2
    if args.requests < 1 or args.max_new_tokens < 1:
        print("--requests and --max-new-tokens must be at least 1", file=sys.stderr)
        return 2
    progress("stops")("starting the model server, batching on")
    with running_modelserver(
        args.model_base_path,
        model_name=args.model_name,
        enable_batching=True,
        batching_parameters_file=args.batching_parameters_file,
        file_system_poll_wait_seconds=0,
        extra_args=["--log_level=WARNING"],
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        start_timeout_s=180,
        stop_timeout_s=30,
    ) as server:
        try:
            modes = measure(server.rest_url, args.model_name, args)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            print(
                f"the model server refused the request ({exc.code}: {detail}); an export from "
                "before in-graph stops has no `stop` input: re-export it (`make model`)",
                file=sys.stderr,
            )
            return 1
    doc = report(modes, args)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print(doc)
    return 0
