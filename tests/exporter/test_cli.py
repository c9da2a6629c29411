"""`tokenpulse exporter`: flags and env onto settings, clear start-up errors, a real process."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from exporter.cli import add_arguments, settings_from_args
from tests.support.exporter import scrape, wait_for
from tokenpulse.procs import free_port


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_flags_map_onto_settings(monkeypatch):
    monkeypatch.delenv("TOKENPULSE_EXPORTER_COLLECTORS", raising=False)
    s = settings_from_args(
        _parse(
            [
                "--web.listen-address",
                ":9999",
                "--no-collector.nvml",
                "--collector.canary.interval",
                "5",
            ]
        )
    )
    assert s.listen() == ("", 9999)
    assert s.canary_interval_seconds == 5
    assert s.enabled_collectors() == ["canary", "tfserving"]


def test_defaults(monkeypatch):
    for key in list(os.environ):
        if key.startswith("TOKENPULSE_EXPORTER_"):
            monkeypatch.delenv(key)
    s = settings_from_args(_parse([]))
    assert s.listen() == ("127.0.0.1", 9410)
    assert s.tfserving_url == "http://127.0.0.1:8501"
    assert s.enabled_collectors() == ["canary", "nvml", "tfserving"]


def test_env_vars_and_flags_win(monkeypatch):
    monkeypatch.setenv("TOKENPULSE_EXPORTER_TFSERVING_URL", "http://127.0.0.1:18501")
    monkeypatch.setenv("TOKENPULSE_EXPORTER_COLLECTORS", '{"nvml": false}')
    s = settings_from_args(_parse(["--collector.canary.timeout", "3"]))
    assert s.tfserving_url == "http://127.0.0.1:18501"
    assert s.canary_timeout_seconds == 3
    assert "nvml" not in s.enabled_collectors()
    s = settings_from_args(_parse(["--no-collector.canary"]))  # flags add to env overrides
    assert s.enabled_collectors() == ["tfserving"]


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stack.cli", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--web.listen-address", "nope"], "listen address must be host:port"),
        (["--tfserving.url", "ftp://x"], "tfserving url must be http"),
        (["--tfserving.model-config-file", "/nonexistent/models.config"], "does not exist"),
        (["--collector.canary.interval", "0"], "greater than 0"),
        (["--collector.nvml.backend", "magic"], "--collector.nvml.backend"),
        (["--collector.nvml.fields-file", "/nonexistent/fields.csv"], "cannot read nvml fields"),
        (["--collector.nvml.fake-faults", "/tmp/f.json"], "needs --collector.nvml.backend=fake"),
    ],
)
def test_bad_settings_exit_2_with_a_message(args, message):
    done = _run_cli(*args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_bad_model_config_exits_2(tmp_path):
    cfg = tmp_path / "models.config"
    cfg.write_text("model_config_list { config { name: 'gen' ")
    done = _run_cli("--tfserving.model-config-file", str(cfg))
    assert done.returncode == 2 and "unexpected end of file" in done.stderr
    assert "Traceback" not in done.stderr


def test_real_process_serves_and_stops_on_sigterm():
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stack.cli",
            "exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--tfserving.url=http://127.0.0.1:{free_port()}",
            "--collector.nvml.backend=fake",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def metrics() -> str | None:
            try:
                return scrape(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                return None

        text = wait_for(metrics, what="exporter listening")
        assert "tokenpulse_exporter_build_info" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    # one log format: JSON lines like every other component (stderr is not a TTY here)
    lines = [json.loads(line) for line in proc.stderr.read().splitlines()] if proc.stderr else []
    # the NVML session logs "nvml ready" from its own thread, before or after the listener
    assert {"exporter listening", "exporter stopping"} <= {line["message"] for line in lines}
    assert {line["component"] for line in lines} == {"exporter"}


def test_help_shows_node_exporter_names_descriptions_and_defaults():
    parser = argparse.ArgumentParser(prog="tokenpulse exporter")
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert "--web.listen-address ADDRESS host:port for /metrics" in text
    assert "(default: 127.0.0.1:9410; env TOKENPULSE_EXPORTER_LISTEN_ADDRESS)" in text
    assert "--collector.nvml.backend {real,fake}" in text
    assert "--collector.nvml, --no-collector.nvml" in text


def test_exporter_never_imports_tensorflow():
    code = textwrap.dedent(
        """
        import sys
        from prometheus_client import generate_latest
        import exporter.cli, devtools.bench.exporter, devtools.standins.tfserving
        from exporter.server import build_registry
        from exporter.settings import ExporterSettings
        from exporter.sources import Sources
        import exporter.nvml.real
        s = ExporterSettings(nvml_backend="fake", tfserving_url="http://127.0.0.1:9")
        src = Sources(s)
        generate_latest(build_registry(s, src))
        src.status_tracker().poll()
        src.canary_runner().run_once()
        roots = ("tensorflow", "tensorflow_serving", "keras")
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in roots)
        print("HEAVY=" + ",".join(heavy))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "HEAVY="
