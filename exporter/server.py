"""The exporter process: build the enabled collectors, start their sources, serve /metrics."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from exporter.exposition import CONTENT_TYPE, encode
from exporter.registry import specs
from exporter.scrape import ScrapeCollector
from exporter.settings import ExporterSettings
from exporter.sources import Sources
from exporter.version import __version__
from tokenpulse.logging import configure_logging, get_logger
from tokenpulse.threaded_http import make_wsgi_server

# Bound here too: contextvars bound in main() do not reach the exporter's threads.
log = get_logger(__name__).bind(component="exporter")

_LANDING = """<html><head><title>TokenPulse exporter</title></head><body>
<h1>TokenPulse exporter {version}</h1><p>Collectors: {collectors}</p>
<p><a href="/metrics">Metrics</a> &middot; <a href="/healthz">Health</a></p></body></html>
"""


def build_registry(settings: ExporterSettings, sources: Sources) -> CollectorRegistry:
    """A dedicated registry (not prometheus_client's default one, which collects on register)."""
    known = specs()
    collectors = {name: known[name].factory(sources) for name in settings.enabled_collectors()}
    registry = CollectorRegistry()
    registry.register(ScrapeCollector(collectors))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def make_app(registry: CollectorRegistry, collectors: Iterable[str]) -> Callable[..., Any]:
    """The WSGI app: /metrics, /healthz, and a landing page at /.

    /metrics always answers in the text format (what TF Serving serves too): Prometheus accepts
    it, and the fast encoder keeps scrapes cheap. No gzip: the exporter is a sidecar.
    """
    landing = _LANDING.format(version=__version__, collectors=", ".join(collectors)).encode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body = encode(registry.collect())
            start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
            return [body]
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [landing]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; try /metrics\n"]

    return app


class Exporter:
    """A running exporter: HTTP server plus the sources' threads."""

    def __init__(self, settings: ExporterSettings) -> None:
        self.settings = settings
        self.sources = Sources(settings)
        self.registry = build_registry(settings, self.sources)
        host, port = settings.listen()
        app = make_app(self.registry, settings.enabled_collectors())
        self.httpd = make_wsgi_server(host or "0.0.0.0", port, app)
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the sources and serve in a background thread."""
        self.sources.start()
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True)
        self._thread.start()
        log.info(
            "exporter listening",
            address=f"{self.settings.listen()[0] or '0.0.0.0'}:{self.port}",
            collectors=self.settings.enabled_collectors(),
            version=__version__,
        )

    def stop(self) -> None:
        """Stop serving and stop every background thread."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.sources.close()


def run(settings: ExporterSettings) -> int:
    """Serve until SIGINT/SIGTERM; the importable entry point behind `tokenpulse exporter`."""
    configure_logging("exporter", settings.log_level)
    exporter = Exporter(settings)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    exporter.start()
    done.wait()
    log.info("exporter stopping")
    exporter.stop()
    return 0
