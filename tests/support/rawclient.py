"""A raw HTTP connection for tests of slow, silent and excess clients.

It keeps every byte the server sent, however the connection ended. asyncio's stream reader
would not: a write the server's close reset makes `read()` raise that reset instead of
returning the answer it already holds.
"""

from __future__ import annotations

import asyncio


class RawClient(asyncio.Protocol):
    """Open with `loop.create_connection(RawClient, host, port)`; `closed` gives what the server
    sent once the connection ends."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._transport: asyncio.Transport | None = None

    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None, "not connected"
        return self._transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(bytes(self.data))

    def answered(self) -> bool:
        """The server has begun its answer, or the connection is ending."""
        return bool(self.data) or self.closed.done() or self.transport.is_closing()

    def send(self, data: bytes) -> None:
        """Write, unless the connection is closing."""
        if not self.transport.is_closing():
            self.transport.write(data)
