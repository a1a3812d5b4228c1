"""A TCP proxy between the nodes and the test PostgreSQL, to take the database away from some nodes and give
it back, faster and more surely than stopping the server: ``cut()`` closes every connection through it and
refuses new ones (a database that went away), ``restore()`` takes connections again on the same port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from .conftest import free_port


class PgProxy:
    """Forwards ``127.0.0.1:port`` to the database of ``url``; ``url`` of the proxy is ``self.url``."""

    def __init__(self, url: str) -> None:
        split = urlsplit(url)
        assert split.hostname is not None and split.port is not None
        self._upstream = (split.hostname, split.port)
        self.port = free_port()
        user = f"{split.username}@" if split.username else ""
        self.url = urlunsplit(split._replace(netloc=f"{user}127.0.0.1:{self.port}"))
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def restore(self) -> None:
        """Take connections (again) on the proxy's port."""
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def cut(self) -> None:
        """Close every connection through the proxy, and refuse new ones until ``restore``."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def close(self) -> None:
        await self.cut()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update({writer, up_writer})
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._pipes.update(pipes)
        for pipe in pipes:
            pipe.add_done_callback(self._pipes.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()


@contextlib.asynccontextmanager
async def pg_proxy(url: str) -> AsyncIterator[PgProxy]:
    proxy = PgProxy(url)
    await proxy.restore()
    try:
        yield proxy
    finally:
        await proxy.close()
