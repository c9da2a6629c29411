"""`tokenpulse bench exporter`: scrape latency percentiles and RSS of a real exporter process.

The exporter runs as its own process with every collector on, against a TF Serving REST stand-in
(status and predict answer at once, so the figures are the exporter's own) while the canary runs
on a short schedule in the background. NVML is the real library when a GPU is present, otherwise
the fake backend simulating a node (the report names which). A second exporter with every
collector off runs side by side as the baseline for HTTP and exposition overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from devtools.bench.harness import latency_ms, rss_bytes
from stack.launch import ExporterProcess, LaunchError, running_exporter
from stack.loadtest.procstat import cpu_seconds
from stack.loadtest.prom import parse_metrics
from tokenpulse.tfserving.render import render_models_config
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, GOLDEN_FILE

P99_TARGET_S = 0.020
RSS_TARGET_BYTES = 80 * 1024 * 1024
_CANARY_READY = f'tokenpulse_canary_match{{model="{DEFAULT_MODEL_NAME}",version="2"}} 1.0'
_BASELINE_READY = "tokenpulse_exporter_build_info"
_DURATION = "tokenpulse_exporter_collector_duration_seconds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `tokenpulse bench exporter`."""
    parser.add_argument("--scrapes", type=int, default=500, help="scrapes per exporter (500)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured scrapes first (20)")
    parser.add_argument("--fake-gpus", type=int, default=8, help="GPUs of the fake backend (8)")
    parser.add_argument(
        "--backend",
        choices=["auto", "real", "fake"],
        default="auto",
        help="NVML backend: auto = real when NVML works here, else fake",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _pick_backend(choice: str) -> tuple[str, str]:
    """(backend, description)."""
    if choice == "fake":
        return "fake", "fake (simulated node, asked for)"
    from exporter.nvml.backend import NvmlError
    from exporter.nvml.real import RealNvmlBackend

    real = RealNvmlBackend()
    try:
        real.init()
        gpus = real.device_count()
        real.shutdown()
        return "real", f"real NVML ({gpus} GPU(s))"
    except NvmlError as exc:
        if choice == "real":
            raise SystemExit(f"bench exporter: NVML not usable here: {exc}") from exc
        return "fake", f"fake (no usable NVML here: {exc})"


_PROMPTS = {"The sky is": " blue and wide", "Once upon a time": " there was a model"}


def _setup_models(tmp: Path) -> tuple[Path, dict[str, tuple[str, float]]]:
    """A models.config with one model, two versions, labels, and each version's golden file."""
    base = tmp / DEFAULT_MODEL_NAME
    for version in (1, 2):
        golden = base / str(version) / GOLDEN_FILE
        golden.parent.mkdir(parents=True)
        rows = [{"prompt": p, "text": t, "mean_nll": 1.0} for p, t in _PROMPTS.items()]
        golden.write_text(json.dumps({"max_new_tokens": 8, "prompts": rows}))
    config = tmp / "models.config"
    labels = {"stable": 1, "canary": 2}
    config.write_text(render_models_config(DEFAULT_MODEL_NAME, base, (1, 2), labels))
    return config, {p: (t, 1.0) for p, t in _PROMPTS.items()}


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return bytes(resp.read())


class _Target:
    """One exporter process under test, and what its scrapes showed."""

    def __init__(self, exporter: ExporterProcess) -> None:
        self.exporter = exporter
        self.latencies: list[float] = []
        self.durations: dict[str, float] = {}
        self.body = b""
        self.cpu_start = 0.0
        self.cpu_s = 0.0

    def scrape(self, record: bool) -> None:
        start = time.perf_counter()
        body = _get(self.exporter.metrics_url)
        if record:
            self.latencies.append(time.perf_counter() - start)
            self.body = body
            for (metric, labels), value in parse_metrics(body.decode()).items():
                if metric == _DURATION:
                    name = dict(labels)["collector"]
                    self.durations[name] = self.durations.get(name, 0.0) + value

    def figures(self) -> dict[str, Any]:
        rss, peak = rss_bytes(self.exporter.pid)
        lat, text = self.latencies, self.body.decode()
        return {
            "scrapes": len(lat),
            **{k: v for k, v in latency_ms(lat).items() if k != "mean_ms"},
            # CPU the exporter burnt per scrape (background threads included): unlike latency,
            # this does not grow when other processes keep the CPUs busy.
            "cpu_ms_per_scrape": self.cpu_s / len(lat) * 1e3,
            "rss_mb": rss / 2**20,
            "peak_rss_mb": peak / 2**20,
            "series": sum(1 for line in text.splitlines() if line and not line.startswith("#")),
            "bytes": len(self.body),
            "collector_mean_ms": {k: v / len(lat) * 1e3 for k, v in sorted(self.durations.items())},
        }


def _measure(args: argparse.Namespace, targets: list[_Target]) -> list[dict[str, Any]]:
    """Scrape the targets in alternation, so machine noise hits every one alike."""
    for i in range(args.warmup + args.scrapes):
        if i == args.warmup:
            for target in targets:
                target.cpu_start = cpu_seconds(target.exporter.pid)
        for target in targets:
            target.scrape(record=i >= args.warmup)
    for target in targets:
        target.cpu_s = cpu_seconds(target.exporter.pid) - target.cpu_start
    return [target.figures() for target in targets]


def _report(result: dict[str, Any]) -> None:
    full, base = result["all_collectors"], result["baseline_no_collectors"]
    print(
        f"exporter scrape benchmark: {result['scrapes']} scrapes of each exporter, alternating, "
        "a fresh connection per scrape"
    )
    print(f"  nvml backend: {result['nvml_backend']}")
    print(
        f"  machine: {result['cpus']} CPUs, 1-minute load average {result['load_average_1m']:.1f}"
    )
    print(
        f"  {'':22}{'p50 ms':>8}{'p90 ms':>8}{'p99 ms':>8}{'max ms':>8}{'CPU ms':>8}"
        f"{'RSS MB':>8}{'series':>7}"
    )
    for name, r in (("all collectors on", full), ("baseline (all off)", base)):
        print(
            f"  {name:22}{r['p50_ms']:8.2f}{r['p90_ms']:8.2f}{r['p99_ms']:8.2f}{r['max_ms']:8.2f}"
            f"{r['cpu_ms_per_scrape']:8.2f}{r['rss_mb']:8.1f}{r['series']:7d}"
        )
    print("  (CPU ms = exporter CPU time per scrape, background threads included)")
    means = ", ".join(f"{k} {v:.2f} ms" for k, v in full["collector_mean_ms"].items())
    print(f"  mean time inside each collector: {means}")
    print(
        f"  p99 {full['p99_ms']:.2f} ms vs target {P99_TARGET_S * 1e3:.0f} ms: "
        f"{result['p99_vs_target']:.2f}x of target; "
        f"{result['p99_vs_baseline']:.2f}x the baseline p99"
    )
    print(
        f"  RSS {full['rss_mb']:.1f} MB (peak {full['peak_rss_mb']:.1f} MB) vs target "
        f"{RSS_TARGET_BYTES / 2**20:.0f} MB: {result['rss_vs_target']:.2f}x of target"
    )


def main(args: argparse.Namespace) -> int:
    """Run the exporter twice (all collectors on, all off), scrape each, print the figures."""
    from devtools.standins.tfserving import TfServingStandin

    backend, described = _pick_backend(args.backend)
    with tempfile.TemporaryDirectory(prefix="tp-bench-exporter-") as tmp, TfServingStandin() as tfs:
        config, answers = _setup_models(Path(tmp))
        tfs.state.versions[DEFAULT_MODEL_NAME] = {1: "AVAILABLE", 2: "AVAILABLE"}
        tfs.state.answers[(DEFAULT_MODEL_NAME, 1)] = answers
        tfs.state.answers[(DEFAULT_MODEL_NAME, 2)] = answers
        common = ["--log.level", "WARNING"]
        full_args = [
            *common,
            f"--tfserving.url={tfs.url}",
            f"--tfserving.model-config-file={config}",
            "--tfserving.poll-interval=1",
            "--collector.canary.interval=1",  # canaries keep running during the scrapes
            f"--collector.nvml.backend={backend}",
            f"--collector.nvml.fake-gpus={args.fake_gpus}",
        ]
        off = [f"--no-collector.{name}" for name in ("nvml", "tfserving", "canary")]
        try:
            with (
                running_exporter(full_args, ready_line=_CANARY_READY) as full_exporter,
                running_exporter([*common, *off], ready_line=_BASELINE_READY) as base_exporter,
            ):
                full, base = _measure(args, [_Target(full_exporter), _Target(base_exporter)])
        except LaunchError as exc:
            raise SystemExit(f"bench exporter: {exc}") from exc
    result = {
        "scrapes": args.scrapes,
        "nvml_backend": described,
        "all_collectors": full,
        "baseline_no_collectors": base,
        "p99_target_ms": P99_TARGET_S * 1e3,
        "rss_target_mb": RSS_TARGET_BYTES / 2**20,
        "p99_vs_target": full["p99_ms"] / (P99_TARGET_S * 1e3),
        "p99_vs_baseline": full["p99_ms"] / base["p99_ms"],
        "cpu_vs_baseline": full["cpu_ms_per_scrape"] / max(base["cpu_ms_per_scrape"], 1e-9),
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "rss_vs_target": full["rss_mb"] * 2**20 / RSS_TARGET_BYTES,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _report(result)
    return 0
