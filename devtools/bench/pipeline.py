"""`tokenpulse bench pipeline`: the sample pipeline's throughput and delay, side by side in one run.

1. Shipper throughput: one spool of records (written through the sink's real writer: sampling,
   redaction, record building) shipped by a `tokenpulse shipper` process into SQLite, then into
   the ES stand-in (its own process, so its CPU is not the shipper's). Targets: >= 10,000 docs/s
   each.
2. Gateway throughput with 100 % sampling against sampling off: two sampling-off gateways and
   one sampling gateway against one TF Serving stand-in, all three loaded at once in rounds, so
   that bursts of load from outside this run (a shared VM has them: one-at-a-time phases of
   identical gateways differed by up to 30 %) hit them alike; their clients start in a rotated
   order each round. The ratio is the sampling gateway's requests over the mean of the two
   others', over every round of several trials, each with three fresh processes: two identical
   processes differ by a percent or two in CPU per request (hash seed, memory layout), which one
   trio alone would count as the sampling's cost or gain. Target: >= 97 %. The two sampling-off
   gateways against each other are the control: how far apart two identical instances land.
   Beside it, the capacity ratio: CPU per request off over on, what one core of gateway serves.
   The writer process (nice 19) runs on what the rounds leave idle (the clients and the
   stand-in wait too) and catches up between rounds; the bench reports its CPU per request, its
   CPU inside the rounds against the gateway's, how long it took to catch up, and whether it
   wrote a record for every request (none dropped).
3. End-to-end delay from response to acknowledgement (p50/p95 over every record): the sampling
   gateway under steady load with a shipper feeding both stores. Target: p95 <= 5 s.
4. What the default rules (`log_pipeline/sampling.toml`) keep of the local stack's traffic: a
   gateway with those rules, every request finishing at its own max_tokens as the TF Serving
   stand-in answers; the share of requests kept per first reason, and skipped per reason.
Figures only; nothing here asserts on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devtools.bench.harness import LIMITS, generator, generator_line, progress
from stack.loadtest.client import Client, NativeRoute
from stack.loadtest.engine import Recording, closed_loop, open_loop
from stack.loadtest.procstat import cpu_seconds
from stack.loadtest.prom import Snapshot, quantile_delta, scrape, total
from stack.loadtest.workload import Cycle
from tokenpulse.procs import child_pids, free_port, stop_process
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, FINISH_STOP

DOCS_TARGET = 10_000.0
RATIO_TARGET = 0.97
P95_TARGET_S = 5.0
PROMPT = "call me at 415-555-2671 about the order"  # a phone number for the redaction to find
DELAY = "tokenpulse_shipper_delivery_delay_seconds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `tokenpulse bench pipeline`."""
    parser.add_argument("--records", type=int, default=20_000, help="records to ship (20000)")
    parser.add_argument("--phase-seconds", type=float, default=3.0, help="round length (3 s)")
    parser.add_argument("--trials", type=int, default=3,
                        help="fresh gateway trios, each loaded in rounds (3)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=8, help="rounds per trial (8)")
    parser.add_argument("--concurrency", type=int, default=16, help="clients per gateway (16)")
    parser.add_argument("--delay-seconds", type=float, default=10.0, help="delay phase (10 s)")
    parser.add_argument("--delay-rps", type=float, default=200.0, help="delay phase load (200)")
    parser.add_argument(
        "--sampling-requests", type=int, default=2000, help="default-rules phase (2000)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _metrics(port: int) -> Snapshot:
    """The /metrics page of a local process."""
    return scrape(f"http://127.0.0.1:{port}/metrics")


def _wait(cond: Any, what: str, timeout_s: float, every_s: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError):
            if cond():
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"bench pipeline: timed out waiting for {what}")
        time.sleep(every_s)


@contextlib.contextmanager
def _process(
    cmd: list[str], env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        stop_process(proc)


@contextlib.contextmanager
def _es_standin() -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "devtools.standins.es", str(port)]
    with _process(cmd):
        url = f"http://127.0.0.1:{port}"
        _wait(lambda: urllib.request.urlopen(url, timeout=1).status == 200, "the ES stand-in", 30)
        yield url


@contextlib.contextmanager
def _shipper(
    spool: Path, state: Path, outputs: list[str], **extra: str
) -> Iterator[tuple[int, int]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_SHIPPER_")}
    cmd = [sys.executable, "-m", "stack.cli", "shipper", "--spool-dir", str(spool),
           "--state-dir", str(state), "--outputs", *outputs, "--metrics-port", str(port),
           "--log-level", "WARNING", "--poll-interval-s", "0.05"]  # fmt: skip
    for flag, value in extra.items():
        cmd += [f"--{flag.replace('_', '-')}", value]
    with _process(cmd, env) as proc:
        _wait(lambda: bool(_metrics(port)), "the shipper's /metrics", 60)
        yield port, proc.pid


def _written(port: int) -> float:
    return total(_metrics(port), "tokenpulse_spool_records_written_total") or 0.0


def _shipped(port: int, output: str) -> float:
    shipped = "tokenpulse_shipper_records_shipped_total"
    return total(_metrics(port), shipped, {"output": output}) or 0.0


def _fill_spool(spool: Path, n: int) -> tuple[float, int]:
    """Write `n` kept records through the real sink; records per CPU-second of that work, and
    how many records the spool holds."""
    from devtools.corpus import pii_corpus
    from log_pipeline.sampler import SamplingRules
    from log_pipeline.settings import SinkSettings
    from log_pipeline.writer import SampleWriter
    from tokenpulse.samples import OutputSignals, RequestStats, Sample

    sink = SampleWriter(SinkSettings.model_validate({"spool_dir": spool}), rng=random.Random(0))
    sink.sampler.rules = SamplingRules.model_validate(
        {"head_rate": 1.0, "caps": {"per_key_per_minute": 0}}
    )
    texts = [t.text for t in pii_corpus(seed=5, size=500)]
    now = time.time()
    start = time.thread_time()  # this thread's CPU: the sink's work, not the box's load
    batch: list[Sample] = []
    signals = OutputSignals(40, 16, FINISH_STOP, False, 0.1, 2.0)  # frozen: one for every request
    for i in range(n):
        stats = RequestStats(request_id=f"bench-{i}", route="generate", model=DEFAULT_MODEL_NAME,
                             version="1", key_id="bench", total_s=0.05, upstream_s=0.04,
                             outputs=[signals])  # fmt: skip
        batch.append(Sample(stats, (texts[i % 500],), (texts[(i * 7) % 500][:120],),
                            {"max_new_tokens": 16}, now))  # fmt: skip
        if len(batch) == 512 or i == n - 1:  # in batches, as the sink's writer process writes
            sink.write_batch(batch)
            batch = []
    elapsed = time.thread_time() - start
    sink.close()
    written = sink.registry.get_sample_value("tokenpulse_spool_records_written_total") or 0.0
    return n / elapsed, int(written)


def _ship_rate(
    spool: Path, tmp: Path, output: str, n: int, extra: dict[str, str]
) -> tuple[float, float]:
    """docs/s of one shipper process into one output, from its first ack to its last, and docs
    per CPU-second of that process (what one core would sustain, whatever else the box runs)."""
    copy = tmp / f"spool-{output}"
    shutil.copytree(spool, copy)
    with _shipper(copy, tmp / f"state-{output}", [output], **extra) as (port, pid):
        _wait(lambda: _shipped(port, output) > 0, f"first {output} ack", 60)
        t0, cpu0, first = time.perf_counter(), cpu_seconds(pid), _shipped(port, output)
        # scraped at 10 Hz: each scrape renders the shipper's /metrics on the shipper's own CPU
        _wait(lambda: _shipped(port, output) >= n, f"{n} {output} acks", 600, every_s=0.1)
        wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
        return (n - first) / wall, (n - first) / max(cpu, 1e-3)


def _client(url: str, key: str) -> Client:
    return Client(url, NativeRoute(DEFAULT_MODEL_NAME), [key], timeout_s=60)


def _requests() -> Cycle:
    return Cycle(3, seeded=False, prompts=(PROMPT,))


def _answered(rec: Recording, recs: list[Recording]) -> int:
    """Requests answered; a failed one ends the bench (a stand-in upstream answers them all)."""
    failed = next((o for o in rec.outcomes if not o.ok), None)
    if failed is not None:
        raise SystemExit(f"bench pipeline: gateway answered {failed.label}")
    recs.append(rec)
    return len(rec.outcomes)


async def _paced(url: str, key: str, n: int, rps: float, recs: list[Recording]) -> None:
    """Send `n` requests to `url` at `rps` (an open loop)."""
    async with _client(url, key) as client:
        rec = await open_loop(client, _requests(), [i / rps for i in range(n)], n / rps,
                              limits=LIMITS, progress=None)  # fmt: skip
    _answered(rec, recs)


async def _load_for(
    url: str, key: str, seconds: float | None, concurrency: int, recs: list[Recording],
    requests: int | None = None,
) -> int:  # fmt: skip
    """Requests completed against `url` by `concurrency` clients in `seconds` (or until
    `requests` were sent)."""
    async with _client(url, key) as client:
        rec = await closed_loop(client, _requests(), concurrency, seconds, requests=requests,
                                limits=LIMITS, progress=None)  # fmt: skip
    return _answered(rec, recs)


async def _round(
    gateways: dict[str, Any], order: list[str], key: str, seconds: float, conc: int,
    recs: list[Recording],
) -> dict[str, int]:  # fmt: skip
    """Load every gateway at once; `order` is the order their clients start in."""
    loads = [_load_for(gateways[n].url, key, seconds, conc, recs) for n in order]
    return dict(zip(order, await asyncio.gather(*loads), strict=True))


def round_ratios(t: dict[str, Any], counts: dict[str, int]) -> None:
    """Book one round's throughput ratios (sampling on against the two off, and off against off)
    in trial `t`. A round in which a gateway answered nothing (a busy machine, a short round) has
    no ratio and is counted as such; its requests still go into the trial's totals."""
    if min(counts.values()) > 0:
        t["round_on"].append(counts["on"] / ((counts["off"] + counts["control"]) / 2))
        t["round_control"].append(counts["control"] / counts["off"])
    else:
        t["rounds_without_ratio"] += 1


def _trial(
    gateways: dict[str, Any], key: str, args: argparse.Namespace, recs: list[Recording]
) -> dict[str, Any]:
    """One trio of fresh gateway processes, loaded at once in rounds (the clients' start order
    rotated round by round): requests each completed, CPU each used (all threads, and the event
    loop's), the writer's CPU inside the rounds and in all, and how long it took to catch up."""
    on = gateways["on"]
    (writer,) = child_pids(on.pid)  # the sink's writer process
    names = list(gateways)
    warm = asyncio.run(_round(gateways, names, key, 1.0, args.concurrency, []))
    _wait(lambda: _written(on.port) >= warm["on"], "the warm-up records", 300)
    t: dict[str, Any] = {
        "done": dict.fromkeys(names, 0), "cpu": dict.fromkeys(names, 0.0),
        "loop": dict.fromkeys(names, 0.0), "round_on": [], "round_control": [],
        "catch_up": [], "writer_cpu_in_rounds": 0.0, "rounds_without_ratio": 0,
    }  # fmt: skip
    written0, writer_cpu0 = _written(on.port), cpu_seconds(writer)
    for i in range(args.rounds):
        target = _written(on.port)
        cpu0 = {n: cpu_seconds(gw.pid) for n, gw in gateways.items()}
        loop0 = {n: cpu_seconds(gw.pid, main_thread=True) for n, gw in gateways.items()}
        in_round0 = cpu_seconds(writer)
        order = names[i % 3 :] + names[: i % 3]
        load = _round(gateways, order, key, args.phase_seconds, args.concurrency, recs)
        counts = asyncio.run(load)
        t["writer_cpu_in_rounds"] += cpu_seconds(writer) - in_round0
        for n, gw in gateways.items():
            t["done"][n] += counts[n]
            t["cpu"][n] += cpu_seconds(gw.pid) - cpu0[n]
            t["loop"][n] += cpu_seconds(gw.pid, main_thread=True) - loop0[n]
        round_ratios(t, counts)
        t0 = time.perf_counter()
        _wait(lambda n=target + counts["on"]: _written(on.port) >= n, "the writer", 300)
        t["catch_up"].append(time.perf_counter() - t0)
    t["writer_cpu"] = cpu_seconds(writer) - writer_cpu0
    t["written"] = _written(on.port) - written0
    t["dropped"] = total(_metrics(on.port), "tokenpulse_spool_records_dropped_total") or 0.0
    return t


def _pooled(trials: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The trials' figures together: requests and CPU summed over every round of every trial.

    Fresh processes per trial: two identical gateway processes differ by a percent or two in CPU
    per request (hash seed, memory layout), so one trio alone cannot tell that from the sampling.
    """

    def total(field: str, name: str) -> float:
        return float(sum(t[field][name] for t in trials))

    done = {n: total("done", n) for n in ("off", "control", "on")}
    if silent := [n for n, count in done.items() if count == 0]:
        raise SystemExit(
            f"bench pipeline: the {', '.join(silent)} gateway answered no request in "
            f"{len(trials) * args.rounds} rounds of {args.phase_seconds:g} s: give the rounds "
            "longer (--phase-seconds)"
        )
    cpu = {n: total("cpu", n) for n in done}
    loop = {n: total("loop", n) for n in done}
    off2 = done["off"] + done["control"]
    baseline = off2 / 2
    seconds = len(trials) * args.rounds * args.phase_seconds
    rounds_on = [r for t in trials for r in t["round_on"]]
    rounds_control = [r for t in trials for r in t["round_control"]]
    trial_ratio = [2 * t["done"]["on"] / (t["done"]["off"] + t["done"]["control"]) for t in trials]
    cpu_off = (cpu["off"] + cpu["control"]) / off2
    return {
        "trials": len(trials),
        "gateway_rps_sampling_off": baseline / seconds,
        "gateway_rps_sampling_100": done["on"] / seconds,
        "gateway_throughput_ratio": done["on"] / baseline,
        "gateway_throughput_ratio_median": statistics.median(rounds_on) if rounds_on else None,
        "gateway_round_ratios": rounds_on,
        "gateway_trial_ratios": trial_ratio,
        # two identical gateways without sampling: how far apart two instances are on this box
        "control_throughput_ratio": done["control"] / done["off"],
        "control_throughput_ratio_median": (
            statistics.median(rounds_control) if rounds_control else None
        ),
        "control_round_ratios": rounds_control,
        "rounds_without_ratio": sum(t["rounds_without_ratio"] for t in trials),
        "control_trial_ratios": [t["done"]["control"] / t["done"]["off"] for t in trials],
        # CPU per request of each gateway process (every thread): what one core of gateway serves
        "gateway_cpu_ms_per_request_off": 1000 * cpu_off,
        "gateway_cpu_ms_per_request_on": 1000 * cpu["on"] / done["on"],
        "gateway_capacity_ratio": cpu_off / (cpu["on"] / done["on"]),
        "control_cpu_ratio": (cpu["off"] / done["off"]) / (cpu["control"] / done["control"]),
        # the split: the event loop's thread, and every other thread of the gateway
        "gateway_loop_cpu_ms_per_request_off": 1000 * (loop["off"] + loop["control"]) / off2,
        "gateway_loop_cpu_ms_per_request_on": 1000 * loop["on"] / done["on"],
        "gateway_other_threads_cpu_ms_per_request_on": max(
            0.0, 1000 * (cpu["on"] - loop["on"]) / done["on"]
        ),
        "sink_catch_up_s_max": max(c for t in trials for c in t["catch_up"]),
        "sink_writer_cpu_ms_per_request": 1000 * sum(t["writer_cpu"] for t in trials) / done["on"],
        # the writer's CPU while the rounds ran, against the sampling gateway's own in them
        "sink_writer_cpu_share_in_rounds": sum(t["writer_cpu_in_rounds"] for t in trials)
        / cpu["on"],
        "sink_requests": int(done["on"]),
        "sink_records_written": sum(t["written"] for t in trials),
        "sink_records_dropped": sum(t["dropped"] for t in trials),
    }


def _kept_shares(
    tmp: Path, upstream: str, keys_file: Path, key: str, n: int, recs: list[Recording]
) -> dict[str, float]:
    """Share of `n` requests the default sampling rules keep per first reason (`kept_<reason>`)
    and skip per reason (`skipped_<reason>`), from the sink writer's counters."""
    from log_pipeline.metrics import KEEP_REASONS, SAMPLER_DROP_REASONS
    from stack.launch import running_gateway

    env = {"TOKENPULSE_SINK_SPOOL_DIR": str(tmp / "default-rules-spool")}
    quiet: dict[str, Any] = {"access_log": False, "log_level": "WARNING"}
    with running_gateway(upstream, keys_file, env=env,
                         sample_sink="log_pipeline.sink:make_sink", **quiet) as gw:  # fmt: skip

        def counts() -> dict[str, float]:
            found = {}
            for (name, labels), value in _metrics(gw.port).items():
                for kind in ("kept", "skipped"):
                    if name == f"tokenpulse_sampler_samples_{kind}_total":
                        (reason,) = (v for _, v in labels)  # the one label: the reason
                        found[f"{kind}_{reason}"] = value
            return found

        asyncio.run(_load_for(gw.url, key, None, 8, recs, requests=n))
        _wait(lambda: sum(counts().values()) >= n, "the writer's sampling decisions", 120)
        got = counts()
    names = [f"kept_{r}" for r in KEEP_REASONS] + [f"skipped_{r}" for r in SAMPLER_DROP_REASONS]
    return {name: got.get(name, 0.0) / n for name in names}


def _gateways(
    tmp: Path, upstream: str, args: argparse.Namespace, say: Any, recs: list[Recording]
) -> dict[str, Any]:
    from serving.gateway.keys import add_key
    from stack.launch import running_gateway

    keys_file = tmp / "keys.json"
    key = add_key(keys_file, "bench", requests_per_minute=1e9, tokens_per_minute=1e9)
    rules = tmp / "keep-all.toml"
    rules.write_text("head_rate = 1.0\n[caps]\nper_key_per_minute = 0\n")
    out: dict[str, Any] = {}
    quiet: dict[str, Any] = {"access_log": False, "log_level": "WARNING"}
    trials = []
    for trial in range(1, args.trials + 1):
        spool = tmp / f"gateway-spool-{trial}"
        sink_env = {"TOKENPULSE_SINK_SPOOL_DIR": str(spool),
                    "TOKENPULSE_SINK_RULES_FILE": str(rules)}  # fmt: skip
        with (
            running_gateway(upstream, keys_file, **quiet) as off,
            running_gateway(upstream, keys_file, **quiet) as control,
            running_gateway(upstream, keys_file, env=sink_env,
                            sample_sink="log_pipeline.sink:make_sink", **quiet) as on,
        ):  # fmt: skip
            say(f"gateway throughput, trial {trial} of {args.trials} (fresh processes): "
                "sampling off vs 100 %, and off vs a second off (the noise)")  # fmt: skip
            trials.append(_trial({"off": off, "on": on, "control": control}, key, args, recs))
            if trial < args.trials:
                continue
            out.update(_pooled(trials, args))
            backlog = _written(on.port)  # this trial's records, all written by now
            say("end-to-end delay: sampling gateway + shipper into both stores")
            out.update(_delay(tmp, spool, on, key, backlog, args, recs))
    say("default sampling rules: share of requests kept per reason")
    out["sampling_requests"] = args.sampling_requests
    n = args.sampling_requests
    out["sampling_shares"] = _kept_shares(tmp, upstream, keys_file, key, n, recs)
    return out


def _delay(
    tmp: Path, spool: Path, on: Any, key: str, backlog: float, args: argparse.Namespace,
    recs: list[Recording],
) -> dict[str, Any]:  # fmt: skip
    """p50/p95 from response to acknowledgement, per store, of a paced load on `on`."""
    out: dict[str, Any] = {}
    state, db = tmp / "state-e2e", str(tmp / "e2e.db")
    both = ["sqlite", "elasticsearch"]
    with (
        _es_standin() as es_url,
        _shipper(spool, state, both, es_url=es_url, sqlite_path=db) as (port, _pid),
    ):
        for output in both:
            _wait(lambda o=output: _shipped(port, o) >= backlog, f"{output} backlog", 120)
        before = _metrics(port)
        n_delay = int(args.delay_seconds * args.delay_rps)
        asyncio.run(_paced(on.url, key, n_delay, args.delay_rps, recs))
        for output in both:
            done = backlog + n_delay
            _wait(lambda o=output, d=done: _shipped(port, o) >= d, f"{output} caught up", 120)
            after, which = _metrics(port), {"output": output}
            for q, name in ((0.50, "p50"), (0.95, "p95")):
                value = quantile_delta(before, after, DELAY, q, which)
                out[f"delay_{output}_{name}_s"] = math.nan if value is None else value
        out["delay_records"] = n_delay
    return out


def _check(args: argparse.Namespace) -> None:
    """One error line for flags no run can use."""
    counts = ("trials", "rounds", "records", "concurrency", "sampling_requests")
    for name in counts:
        if getattr(args, name) < 1:
            raise SystemExit(f"bench pipeline: --{name.replace('_', '-')} must be >= 1")
    for name in ("phase_seconds", "delay_seconds", "delay_rps"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0):
            raise SystemExit(f"bench pipeline: --{name.replace('_', '-')} must be a number > 0")


def main(args: argparse.Namespace) -> int:
    """Run the three measurements and print the figures."""
    from devtools.standins.tfserving import TfServingStandin

    _check(args)
    say = progress("pipeline", quiet=False)
    result: dict[str, Any] = {"records": args.records}
    with tempfile.TemporaryDirectory(prefix="tp-bench-pipeline-") as name:
        tmp = Path(name)
        spool = tmp / "spool"
        say(f"writing {args.records} records through the sink")
        result["sink_records_per_cpu_s"], written = _fill_spool(spool, args.records)
        if written != args.records:
            raise SystemExit(f"bench pipeline: the sink wrote {written} of {args.records} records")
        say("shipper -> sqlite")
        db = {"sqlite_path": str(tmp / "bench.db"), "batch_records": "2000"}
        rate, per_cpu = _ship_rate(spool, tmp, "sqlite", args.records, db)
        result["shipper_sqlite_docs_per_s"] = rate
        result["shipper_sqlite_docs_per_cpu_s"] = per_cpu
        with _es_standin() as es_url:
            say("shipper -> ES stand-in")
            extra = {"es_url": es_url, "batch_records": "2000"}
            rate, per_cpu = _ship_rate(spool, tmp, "elasticsearch", args.records, extra)
            result["shipper_es_docs_per_s"] = rate
            result["shipper_es_docs_per_cpu_s"] = per_cpu
        recs: list[Recording] = []
        with TfServingStandin() as upstream:
            result.update(_gateways(tmp, upstream.url, args, say, recs))
        result["generator"] = generator(recs)
    result["targets"] = {"docs_per_s": DOCS_TARGET, "gateway_ratio": RATIO_TARGET,
                         "delay_p95_s": P95_TARGET_S}  # fmt: skip
    if args.json:
        print(json.dumps(result))
    else:
        _report(result)
    return 0


def _report(r: dict[str, Any]) -> None:
    def mark(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    print(f"records                         {r['records']}")
    print(f"sink (sample+redact+spool)      {r['sink_records_per_cpu_s']:10.0f} records/CPU-s")
    for out, key in (("SQLite", "shipper_sqlite"), ("ES stand-in", "shipper_es")):
        wall, cpu = r[f"{key}_docs_per_s"], r[f"{key}_docs_per_cpu_s"]
        print(f"shipper -> {out:<20} {wall:10.0f} docs/s, {cpu:.0f} docs/CPU-s "
              f"(target >= {DOCS_TARGET:.0f} on one core: {mark(cpu >= DOCS_TARGET)})")  # fmt: skip
    print(f"gateway, sampling off           {r['gateway_rps_sampling_off']:10.1f} req/s each, "
          "two of them")  # fmt: skip
    print(f"gateway, sampling 100 %         {r['gateway_rps_sampling_100']:10.1f} req/s "
          "(all three loaded at once)")  # fmt: skip
    ratio = r["gateway_throughput_ratio"]
    print(f"throughput ratio                {ratio:10.3f}      "
          f"(target >= {RATIO_TARGET}: {mark(ratio >= RATIO_TARGET)}; "
          f"{r['trials']} trials of fresh processes)")  # fmt: skip
    for what, key in (("100 % vs off", "gateway"), ("off vs off (control)", "control")):
        spread = r[f"{key}_round_ratios"]
        trials = ", ".join(f"{x:.3f}" for x in r[f"{key}_trial_ratios"])
        rounds = (
            f"median round {r[f'{key}_throughput_ratio_median']:.3f}, rounds "
            f"{min(spread):.3f} .. {max(spread):.3f}"
            if spread
            else "no round with every arm"
        )
        print(f"  {what:<20} overall {r[f'{key}_throughput_ratio']:.3f}, trials {trials}; "
              f"{rounds}")  # fmt: skip
    if r["rounds_without_ratio"]:
        print(f"  rounds with a gateway that answered nothing: {r['rounds_without_ratio']}")
    print(
        f"gateway CPU per request         {r['gateway_cpu_ms_per_request_off']:.3f} ms off, "
        f"{r['gateway_cpu_ms_per_request_on']:.3f} ms at 100 %: capacity ratio "
        f"{r['gateway_capacity_ratio']:.3f} (off vs off {r['control_cpu_ratio']:.3f})"
    )
    print(
        f"  event loop thread             {r['gateway_loop_cpu_ms_per_request_off']:.3f} ms off, "
        f"{r['gateway_loop_cpu_ms_per_request_on']:.3f} ms at 100 %; other threads "
        f"{r['gateway_other_threads_cpu_ms_per_request_on']:.3f} ms"
    )
    print(f"sink writer process             {r['sink_writer_cpu_ms_per_request']:.3f} ms CPU per "
          f"request; {r['sink_records_written']:.0f} records for {r['sink_requests']} requests, "
          f"{r['sink_records_dropped']:.0f} dropped; caught up within "
          f"{r['sink_catch_up_s_max']:.2f} s of each round; in the rounds it used "
          f"{100 * r['sink_writer_cpu_share_in_rounds']:.1f} % of the gateway's CPU")  # fmt: skip
    print(f"load average during the run     {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for out in ("sqlite", "elasticsearch"):
        p50, p95 = r[f"delay_{out}_p50_s"], r[f"delay_{out}_p95_s"]
        print(f"delay to {out:<14} p50 {p50:6.3f} s  p95 {p95:6.3f} s "
              f"(target p95 <= {P95_TARGET_S:.0f} s: {mark(p95 <= P95_TARGET_S)})")  # fmt: skip
    shares = r["sampling_shares"]
    kept = sum(v for k, v in shares.items() if k.startswith("kept_"))
    print(f"default rules, {r['sampling_requests']} requests at their max_tokens: "
          f"{100 * kept:.1f} % kept")  # fmt: skip
    for name, share in shares.items():
        print(f"  {name.replace('_', ' ', 1):<29} {100 * share:6.1f} %")
    print(generator_line(r["generator"]))
