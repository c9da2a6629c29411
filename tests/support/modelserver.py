"""Start `tokenpulse modelserver` as a subprocess on free loopback ports, for any component's tests.

    with running_modelserver(base_path) as server:
        httpx.get(f"{server.rest_url}/v1/models/gen")

The server is the project's TF-Serving-compatible one (`serving/modelserver`); whatever a test does
against it must also work against the real `tensorflow/serving` image.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tokenpulse.procs import free_port, stop_process

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0


class ModelServerStartError(RuntimeError):
    """The model server exited or never reported an AVAILABLE version."""


@dataclass
class ModelServerProcess:
    """A running model server: where to reach it and how to look at it."""

    rest_url: str  # e.g. http://127.0.0.1:41234
    grpc_target: str  # e.g. 127.0.0.1:41235
    pid: int
    model_name: str
    rest_port: int
    grpc_port: int
    metrics_url: str
    config_file: Path | None
    process: subprocess.Popen[bytes] = field(repr=False)
    stderr_path: Path = field(repr=False)

    def stderr(self) -> str:
        """Everything the server wrote to stderr so far (its structlog JSON lines)."""
        return self.stderr_path.read_text(errors="replace")

    def model_status(self, model_name: str | None = None) -> dict[str, object]:
        """The REST model status document, as TF Serving returns it."""
        name = model_name or self.model_name
        with urllib.request.urlopen(f"{self.rest_url}/v1/models/{name}", timeout=5) as resp:
            return dict(json.loads(resp.read()))

    def metrics_text(self) -> str:
        """The Prometheus page, as text."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
            return str(resp.read().decode())


def _available_versions(rest_url: str, model_name: str) -> list[str]:
    try:
        with urllib.request.urlopen(f"{rest_url}/v1/models/{model_name}", timeout=2) as resp:
            doc = json.loads(resp.read())
    except (urllib.error.URLError, ConnectionError, OSError, ValueError):
        return []
    return [
        str(v["version"])
        for v in doc.get("model_version_status", [])
        if v.get("state") == "AVAILABLE"
    ]


@contextlib.contextmanager
def running_modelserver(
    base_path: Path | None = None,
    *,
    model_name: str = "gen",
    config_file: Path | None = None,
    enable_batching: bool = True,
    batching_parameters: str | None = None,
    file_system_poll_wait_seconds: float = 1.0,
    extra_args: Sequence[str] = (),
    start_timeout_s: float = START_TIMEOUT_S,
) -> Iterator[ModelServerProcess]:
    """Run the model server on `base_path` (single-model form) or `config_file` for the block.

    `batching_parameters` is the text of a TF Serving `batching_parameters.txt` (None: defaults).
    Waits until `model_name` has an AVAILABLE version; the metrics page is always enabled.
    """
    if (base_path is None) == (config_file is None):
        raise ValueError("give exactly one of base_path or config_file")
    rest_port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="tp-modelserver-") as tmp:
        tmpdir = Path(tmp)
        monitoring = tmpdir / "monitoring.config"
        monitoring.write_text(
            'prometheus_config: { enable: true, path: "/monitoring/prometheus/metrics" }\n'
        )
        cmd = [
            sys.executable,
            "-m",
            "tokenpulse.cli",
            "modelserver",
            f"--port={grpc_port}",
            f"--rest_api_port={rest_port}",
            f"--monitoring_config_file={monitoring}",
            f"--file_system_poll_wait_seconds={file_system_poll_wait_seconds:g}",
            f"--enable_batching={'true' if enable_batching else 'false'}",
        ]
        if config_file is not None:
            cmd.append(f"--model_config_file={config_file}")
        else:
            cmd += [f"--model_name={model_name}", f"--model_base_path={base_path}"]
        if batching_parameters is not None:
            params = tmpdir / "batching_parameters.txt"
            params.write_text(batching_parameters)
            cmd.append(f"--batching_parameters_file={params}")
        cmd += list(extra_args)
        stderr_path = tmpdir / "stderr.log"
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True
            )
        server = ModelServerProcess(
            rest_url=f"http://127.0.0.1:{rest_port}",
            grpc_target=f"127.0.0.1:{grpc_port}",
            pid=proc.pid,
            model_name=model_name,
            rest_port=rest_port,
            grpc_port=grpc_port,
            metrics_url=f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics",
            config_file=config_file,
            process=proc,
            stderr_path=stderr_path,
        )
        try:
            deadline = time.monotonic() + start_timeout_s
            while not _available_versions(server.rest_url, model_name):
                if proc.poll() is not None:
                    raise ModelServerStartError(
                        f"model server exited with {proc.returncode}:\n{server.stderr()[-4000:]}"
                    )
                if time.monotonic() > deadline:
                    raise ModelServerStartError(
                        f"no AVAILABLE version of {model_name!r} after {start_timeout_s:.0f}s:\n"
                        f"{server.stderr()[-4000:]}"
                    )
                time.sleep(0.1)
            yield server
        finally:
            stop_process(proc, STOP_TIMEOUT_S)
