"""`run(settings)`: start the gateway and serve until SIGINT/SIGTERM, then drain and exit 0."""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Callable

from aiohttp import web
from prometheus_client import disable_created_metrics

from serving.gateway.app import Gateway
from serving.gateway.errors import connection_error_body
from serving.gateway.settings import GatewaySettings
from tokenpulse.http_limits import HttpLimits, start_site
from tokenpulse.logging import configure_logging, get_logger
from tokenpulse.samples import SampleSink

log = get_logger(__name__)


async def serve(settings: GatewaySettings, sink: SampleSink | None = None) -> None:
    """Serve on settings.host:port until cancelled or signalled."""
    gateway = Gateway(settings, sink=sink)
    runner = web.AppRunner(gateway.app(), access_log=None, handle_signals=False)
    await runner.setup()
    limits = HttpLimits(
        header_timeout_s=settings.header_timeout_s,
        idle_timeout_s=settings.idle_timeout_s,
        max_connections=settings.max_connections,
        error_body=connection_error_body,
    )
    await start_site(
        runner, settings.host, settings.port, limits, on_event=gateway.metrics.connection_rejected
    )
    freeze_startup_heap()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            gateway.drain.cut()  # a second signal: stop waiting for the requests in flight
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    log.info(
        "gateway listening",
        url=f"http://{settings.host}:{settings.port}",
        upstream=settings.upstream_urls,
        models=settings.models,
        keys=len(gateway.keys),
    )
    try:
        await stop.wait()
        # new requests get 503 shutting_down and /readyz says draining; those in flight finish
        await gateway.drain.drain(settings.drain_timeout_s)
    finally:
        log.info("gateway stopping")
        await runner.cleanup()


def freeze_startup_heap() -> None:
    """Move everything start-up built (modules, classes, the app, the metrics) out of the
    collector's reach: a full collection walked all of it, ~5 % of the gateway's CPU under load,
    and more often the more objects requests keep alive a while (samples waiting for their
    flush). Nothing frozen is garbage; it lives as long as the process."""
    gc.collect()
    gc.freeze()


def loop_factory(event_loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop for "uvloop" (its socket I/O and scheduling are C, asyncio's are Python:
    the event loop was a third of the gateway's busy time), None (asyncio's) for "asyncio"."""
    if event_loop != "uvloop":
        return None
    import uvloop

    return uvloop.new_event_loop


def run(settings: GatewaySettings, sink: SampleSink | None = None) -> int:
    """Configure logging and serve; the importable entry point behind `tokenpulse gateway`."""
    configure_logging("gateway", settings.log_level)
    # `_created` series double the page and no dashboard or rule here reads them
    disable_created_metrics()
    with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
        runner.run(serve(settings, sink))
    return 0
