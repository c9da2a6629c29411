"""`tokenpulse up`: the whole local stack on one machine, started in order, stopped on Ctrl-C.

Each component runs as its own process (as it would in the compose deployment), from the same
config files under `serving/config/`. Logs go to `RUN_DIR/logs/<name>.log`; the first process to
die takes the stack down with a clear message, so a broken stack never looks healthy.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The files TF Serving reads; their relative base paths resolve against the working directory.
CONFIG_DIR = Path(__file__).resolve().parents[1] / "serving" / "config"


class UpSettings(BaseSettings):
    """Where the local stack keeps its files and which ports it uses."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_UP_", extra="ignore")

    # Must match the base_path in serving/config/models.config ("models/gen").
    models_dir: Path = Path("models")
    preset: str = "default"
    run_dir: Path = Path("run")
    grpc_port: int = Field(8500, ge=1, le=65535)
    rest_port: int = Field(8501, ge=1, le=65535)
    gateway_port: int = Field(8080, ge=1, le=65535)
    exporter_port: int = Field(9410, ge=1, le=65535)
    start_timeout_s: float = Field(300.0, gt=0)
    exit_after_ready: bool = False  # for smoke tests: start everything, check, stop


@dataclass
class Service:
    """A process of the stack and how to tell it is ready."""

    name: str
    argv: list[str]
    ready: Callable[[], bool]
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)


def _tokenpulse(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenpulse.cli", *args]


def _get_json(url: str) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback only
            return json.loads(resp.read() or b"null")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback only
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError):
        return False


def _model_available(rest: str) -> bool:
    from tokenpulse.tfserving.errors import TfServingBadResponse
    from tokenpulse.tfserving.status import available_versions, parse_model_status

    try:
        return bool(available_versions(parse_model_status(_get_json(f"{rest}/v1/models/gen"))))
    except TfServingBadResponse:
        return False


def ensure_model(settings: UpSettings) -> None:
    """Build version 1 of the model when the base path has no version yet (cached checkpoint)."""
    base = settings.models_dir / "gen"
    if base.is_dir() and any(p.name.isdigit() for p in base.iterdir()):
        return
    print(f"building the {settings.preset!r} model into {base}/1 (cached after the first time)")
    argv = _tokenpulse(
        "model", "build", "--preset", settings.preset, "--base-path", str(base), "--version", "1"
    )
    subprocess.run(argv, check=True)


def ensure_demo_key(run_dir: Path) -> tuple[Path, str]:
    """A keys file holding the hash of a local demo key; the key itself stays in run/ only."""
    keys, secret = run_dir / "gateway-keys.json", run_dir / "demo-key.txt"
    if keys.exists() and secret.exists():
        return keys, secret.read_text().strip()
    out = subprocess.run(
        _tokenpulse("gateway", "keys", "add", "--id", "demo", "--file", str(keys), "--replace"),
        check=True,
        capture_output=True,
        text=True,
    )
    key = out.stdout.strip().splitlines()[-1]
    secret.write_text(key + "\n")
    secret.chmod(0o600)
    return keys, key


def services(settings: UpSettings, keys_file: Path) -> list[Service]:
    """The processes of the local stack, in start order."""
    rest = f"http://127.0.0.1:{settings.rest_port}"
    gateway = f"http://127.0.0.1:{settings.gateway_port}"
    exporter = f"http://127.0.0.1:{settings.exporter_port}"
    models_config = str(CONFIG_DIR / "models.config")
    return [
        Service(
            "modelserver",
            _tokenpulse(
                "modelserver",
                f"--port={settings.grpc_port}",
                f"--rest_api_port={settings.rest_port}",
                f"--model_config_file={models_config}",
                "--model_config_file_poll_wait_seconds=30",
                "--file_system_poll_wait_seconds=5",
                "--enable_batching",
                f"--batching_parameters_file={CONFIG_DIR / 'batching_parameters.txt'}",
                f"--monitoring_config_file={CONFIG_DIR / 'monitoring.config'}",
            ),
            lambda: _model_available(rest),
        ),
        Service(
            "gateway",
            _tokenpulse(
                "gateway",
                "--port",
                str(settings.gateway_port),
                "--upstream-url",
                rest,
                "--keys-file",
                str(keys_file),
                "--model-config-file",
                models_config,
            ),
            lambda: _http_ok(f"{gateway}/readyz"),
        ),
        Service(
            "exporter",
            _tokenpulse(
                "exporter",
                f"--web.listen-address=127.0.0.1:{settings.exporter_port}",
                f"--tfserving.url={rest}",
                f"--tfserving.model-config-file={models_config}",
            ),
            lambda: _http_ok(f"{exporter}/metrics"),
        ),
    ]


def _stop(started: list[Service]) -> None:
    for svc in reversed(started):
        if svc.proc and svc.proc.poll() is None:
            svc.proc.send_signal(signal.SIGTERM)
    for svc in reversed(started):
        if svc.proc:
            try:
                svc.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                svc.proc.kill()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _banner(settings: UpSettings, key: str) -> str:
    from serving.gateway.snippets import curl_snippet, openai_snippet

    gateway = f"http://127.0.0.1:{settings.gateway_port}"
    return "\n".join(
        [
            "",
            "TokenPulse local stack is up:",
            f"  gateway        {gateway}  (OpenAPI {gateway}/openapi.json,"
            f" metrics {gateway}/metrics)",
            f"  model server   REST http://127.0.0.1:{settings.rest_port}/v1/models/gen, "
            f"gRPC 127.0.0.1:{settings.grpc_port}",
            f"  TF Serving metrics http://127.0.0.1:{settings.rest_port}/monitoring/prometheus/metrics",
            f"  exporter       http://127.0.0.1:{settings.exporter_port}/metrics",
            f"  logs           {settings.run_dir / 'logs'}/",
            "",
            "Try it with curl:",
            curl_snippet(gateway, key),
            "",
            "or with the openai SDK (.venv/bin/python):",
            openai_snippet(gateway, key),
            "",
            "Ctrl-C stops everything.",
            "",
        ]
    )


def run(settings: UpSettings) -> int:
    """Start every component in order, wait until each is ready, then supervise until Ctrl-C."""
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    logs = settings.run_dir / "logs"
    logs.mkdir(exist_ok=True)
    ensure_model(settings)
    keys_file, key = ensure_demo_key(settings.run_dir)
    started: list[Service] = []
    stop = {"flag": False}
    # Explicit handlers: a shell that starts us in the background leaves SIGINT ignored, and
    # Ctrl-C must still stop the stack however it was started.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.update(flag=True))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    try:
        for svc in services(settings, keys_file):
            log_file = open(logs / f"{svc.name}.log", "ab")  # noqa: SIM115 - lives with the child
            svc.proc = subprocess.Popen(
                svc.argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            started.append(svc)
            print(f"starting {svc.name} (pid {svc.proc.pid}) ...", flush=True)
            deadline = time.monotonic() + settings.start_timeout_s
            while not svc.ready():
                if stop["flag"]:
                    return 0
                if svc.proc.poll() is not None or time.monotonic() > deadline:
                    print(
                        f"{svc.name} did not become ready; last log lines:\n"
                        f"{_tail(logs / f'{svc.name}.log')}",
                        file=sys.stderr,
                    )
                    return 1
                time.sleep(0.5)
            print(f"  {svc.name} ready", flush=True)
        print(_banner(settings, key), flush=True)
        if settings.exit_after_ready:
            return 0
        while not stop["flag"]:
            for svc in started:
                if svc.proc and svc.proc.poll() is not None:
                    print(
                        f"{svc.name} exited with {svc.proc.returncode}; stopping the stack.\n"
                        f"{_tail(logs / f'{svc.name}.log')}",
                        file=sys.stderr,
                    )
                    return 1
            time.sleep(1)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        print("stopping ...", flush=True)
        _stop(started)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `tokenpulse up` (each also TOKENPULSE_UP_<NAME>)."""
    parser.add_argument("--models-dir", default=None)
    parser.add_argument("--preset", default=None, help="model preset built when none exists")
    parser.add_argument("--run-dir", default=None, help="keys, demo key and logs (default run/)")
    for name in ("grpc", "rest", "gateway", "exporter"):
        parser.add_argument(f"--{name}-port", type=int, default=None)
    parser.add_argument(
        "--exit-after-ready",
        action="store_true",
        default=None,
        help="start everything, print how to use it, then stop (smoke test)",
    )


def main(args: argparse.Namespace) -> int:
    """Build the settings and run the stack."""
    from pydantic import ValidationError

    given = {
        k: v
        for k, v in vars(args).items()
        if not k.startswith("_") and v is not None and k in UpSettings.model_fields
    }
    try:
        settings = UpSettings(**given)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(settings)
