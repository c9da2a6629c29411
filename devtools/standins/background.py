"""An aiohttp application served from a background thread on 127.0.0.1: the stand-ins' lifecycle.

    server = BackgroundServer(make_app, name="tfserving-standin")
    server.start()   # listens on a free port (or `port`); server.url
    server.stop()    # connections are refused from now on
    server.start()   # listens again on the same port

Tests drive protocol stand-ins this way: a stand-in builds its `web.Application` and keeps its own
state; this class owns the event loop, the thread and the socket.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Self

from aiohttp import web

START_TIMEOUT_S = 10.0
SHUTDOWN_TIMEOUT_S = 1.0


class BackgroundServer:
    """Serve `make_app()` until stop(); restartable on the same port; a context manager."""

    def __init__(
        self, make_app: Callable[[], web.Application], port: int = 0, name: str = "stand-in"
    ) -> None:
        self.port = port
        self._make_app = make_app
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen (on the previous port when restarting); RuntimeError if that does not happen."""
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = self._loop = asyncio.new_event_loop()

        async def boot() -> None:
            # stop() is an outage, not a drain: requests in flight get SHUTDOWN_TIMEOUT_S, then
            # are cut (aiohttp's default waits a minute for them, past stop()'s own bound)
            self._runner = web.AppRunner(
                self._make_app(), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S
            )
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
            await site.start()
            self.port = self._runner.addresses[0][1]

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(boot())
            except Exception as exc:  # reported to start()'s caller below
                failure.append(exc)
                return
            finally:
                ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True, name=self._name)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S) or failure:
            self._loop = None
            why = failure[0] if failure else f"not listening after {START_TIMEOUT_S:g}s"
            raise RuntimeError(f"{self._name} did not start: {why}")

    def stop(self) -> None:
        """Stop listening and end the thread (a no-op when not started)."""
        if self._loop is None or self._runner is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(self._runner), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
        self._loop = None
        self._runner = None

    @staticmethod
    async def _shutdown(runner: web.AppRunner) -> None:
        """Close the site, then end every task still in the loop (a handler cut after the
        shutdown timeout is cancelled, not yet finished): a task left pending when the loop closes
        is destroyed later, at some garbage collection, and asyncio logs that into whatever runs
        then (a CLI test's stderr)."""
        await runner.cleanup()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BackgroundStandin:
    """The lifecycle every aiohttp stand-in shares: subclasses set `self._server` and add routes."""

    _server: BackgroundServer

    @property
    def port(self) -> int:
        """The port it listens on (0 until started; kept across stop() and start())."""
        return self._server.port

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234."""
        return self._server.url

    def start(self) -> Self:
        """Listen on 127.0.0.1 (a free port unless one was given, the same one on a restart)."""
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are refused until start() again."""
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
