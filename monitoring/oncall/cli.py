"""`tokenpulse oncall-receiver`: the local webhook receiver every Alertmanager route points at."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from monitoring.oncall.server import OncallSettings, serve
from tokenpulse.logging import configure_logging, get_logger
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags from OncallSettings (each also TOKENPULSE_ONCALL_<NAME>)."""
    add_settings_arguments(parser, OncallSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C."""
    settings = settings_from_args(OncallSettings, args)
    configure_logging("oncall")
    try:
        server = serve(settings, lambda line: print(line, flush=True))
    except OSError as exc:
        print(f"oncall-receiver: error: cannot listen: {exc}", file=sys.stderr)
        return 1
    host, port = server.server_address[:2]
    get_logger(__name__).info("listening", host=host, port=port, file=str(settings.file))
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stop.wait()
    server.shutdown()
    server.server_close()
    return 0
