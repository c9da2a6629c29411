"""The drill stack: one `tokenpulse up` with the drill options, for the drill and soak tests.

tests/support/stack.py puts each drill shard in a lane of its own (the soak beside the restarts
shard), so under xdist the two shards drill two stacks at once, each started once on its worker;
without xdist one stack serves both, one shard after the other.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack.drill.canary import DEGRADED_VERSION
from tests.e2e.upstack import UpStack, running_up
from tests.support.models import install_version
from tokenpulse.procs import stop_process

# both versions healthy (the e2e up test's degraded canary would fire canary alerts all along);
# the drill profile (stack/profiles.py) replaces STACK_FLAGS' test profile: later flags win.
DRILL_FLAGS = ("--preset=tiny", "--profile=drill")


def _port_outside_ephemeral() -> int:
    """A free port below the kernel's ephemeral range, where running_up's own free ports come
    from: two free_port() calls may return the same port, and up refuses a port given twice."""
    for port in random.sample(range(20000, 30000), 500):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-29999")


@contextlib.contextmanager
def _es_standin(workdir: Path) -> Iterator[str]:
    """The ES stand-in as a process of its own (as a real Elasticsearch would be): its URL."""
    port = _port_outside_ephemeral()
    url = f"http://127.0.0.1:{port}"
    with (workdir / "es-standin.log").open("wb") as log:
        cmd = [sys.executable, "-m", "devtools.standins.es", str(port)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(url, timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"the ES stand-in did not start: {log.name}") from None
                    time.sleep(0.2)
            yield url
        finally:
            stop_process(proc)


@pytest.fixture(scope="session")
def drill_stack(
    tiny_export: Path, tiny_degraded_export: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UpStack]:
    """`tokenpulse up` with compressed rules, fault proxies and fast polls, in its own folder,
    shipping samples to an ES stand-in too."""
    workdir = tmp_path_factory.mktemp("drill-stack")
    base = workdir / "models" / "gen"
    install_version(tiny_export, base, 1)
    install_version(tiny_export, base, 2)
    # drill degraded-canary serves it as canary; installed here, it does not build one
    install_version(tiny_degraded_export, base, DEGRADED_VERSION)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPULSE_")}
    proxy = f"--fault-proxy-port={_port_outside_ephemeral()}"
    with _es_standin(workdir) as es_url:
        # the shipper reaches the stand-in through a fault proxy: drill es-unreachable
        es = (f"--es-url={es_url}", f"--es-fault-proxy-port={_port_outside_ephemeral()}")
        with running_up(workdir, *DRILL_FLAGS, proxy, *es, env=env) as stack:
            yield stack
