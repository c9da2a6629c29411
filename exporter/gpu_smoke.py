"""GPU smoke check: the nvml collector on the real NVML library, printing its exposition.

    python -m exporter.gpu_smoke [--collects 200] [--xid-seconds 0]

For a machine with an NVIDIA GPU and driver: it shows every exported GPU series as Prometheus
would scrape it, how long a collect takes, and whether XID events can be watched. Exits 2 when
NVML is not usable here.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

from prometheus_client import CollectorRegistry

from exporter.collectors.nvml import NvmlCollector
from exporter.exposition import encode
from exporter.nvml.fields import load_fields
from exporter.nvml.real import RealNvmlBackend
from exporter.nvml.session import NvmlSession
from exporter.scrape import ScrapeCollector


def main(argv: list[str] | None = None) -> int:
    """Run the real-NVML collector; print exposition, collect timings and promtool's verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collects", type=int, default=200, help="timed collects (200)")
    parser.add_argument("--xid-seconds", type=float, default=0, help="watch XIDs this long")
    args = parser.parse_args(argv)

    session = NvmlSession(RealNvmlBackend(), retry_s=0)
    if not session.ensure():
        print(f"gpu smoke: NVML not usable here: {session.error}", file=sys.stderr)  # noqa: T201
        return 2
    registry = CollectorRegistry()
    registry.register(ScrapeCollector({"nvml": NvmlCollector(session, load_fields())}))
    try:
        text = encode(registry.collect()).decode()
        print(text, end="")  # noqa: T201
        timings = []
        for _ in range(args.collects):
            start = time.perf_counter()
            encode(registry.collect())
            timings.append(time.perf_counter() - start)
        timings.sort()
        p50, p99 = timings[len(timings) // 2], timings[int(len(timings) * 0.99) - 1]
        report = (
            f"# gpu smoke: {len(session.devices)} GPU(s), driver {session.driver_version}, "
            f"CUDA {session.cuda_version}; collect+encode p50 {p50 * 1e3:.2f} ms, "
            f"p99 {p99 * 1e3:.2f} ms over {len(timings)}"
        )
        print(report, file=sys.stderr)  # noqa: T201
        if shutil.which("promtool"):
            lint = subprocess.run(
                ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
            )
            verdict = (lint.stdout + lint.stderr).strip() or "clean"
            print(f"# promtool check metrics: rc={lint.returncode} {verdict}", file=sys.stderr)  # noqa: T201
        if args.xid_seconds > 0:
            time.sleep(args.xid_seconds)
            counts, _ = session.xids.read()
            seen = {k: n for k, n in counts.items() if n}
            print(f"# xid events in {args.xid_seconds:g}s: {seen or 'none'}", file=sys.stderr)  # noqa: T201
        success = 'tokenpulse_exporter_collector_success{collector="nvml"} 1.0' in text
        return 0 if success else 1
    finally:
        session.close()


if __name__ == "__main__":
    sys.exit(main())
