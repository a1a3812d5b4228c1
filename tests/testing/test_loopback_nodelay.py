"""The test doubles answer without Nagle's algorithm: a body written after its headers goes out at once.

With Nagle on, the body waited for the client to acknowledge the headers, and clients delay that
acknowledgement: about 40 ms on every scripted answer, which every test and benchmark on loopback paid.
Asserted on the server's side of a live connection (the socket option), not by timing it.
"""

from __future__ import annotations

import asyncio
import socket

from steadyloop.testing.server import ScriptedServer


async def test_the_scripted_servers_connections_send_small_writes_at_once() -> None:
    async with ScriptedServer() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"GET /v1/models HTTP/1.1\r\nhost: scripted\r\n\r\n")
            await writer.drain()
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            runner = server._serving.uvicorn
            assert runner is not None
            (connection,) = runner.server_state.connections
            accepted = connection.transport.get_extra_info("socket")
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            writer.close()
            await writer.wait_closed()
