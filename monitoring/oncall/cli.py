"""`tokenpulse oncall-receiver`: the local webhook receiver every Alertmanager route points at."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from pydantic import ValidationError

from monitoring.oncall.server import OncallSettings, serve
from tokenpulse.logging import configure_logging, get_logger


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags (each also TOKENPULSE_ONCALL_<NAME>)."""
    parser.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", default=None, help="listen port (default 9095)")
    parser.add_argument(
        "--file", default=None, help="JSON-lines file notifications are appended to"
    )


def main(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C."""
    given: dict[str, Any] = {k: getattr(args, k) for k in ("host", "port", "file")}
    try:
        settings = OncallSettings(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        print(f"oncall-receiver: error: {first['loc'][0]}: {first['msg']}", file=sys.stderr)
        return 2
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
