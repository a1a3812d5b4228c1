"""MCP servers as steadyloop tools: connect over stdio or streamable HTTP, list their tools, call them (public).

How an MCP tool becomes a ``Tool``:

- **name**: characters our names reject (``.``, ``/``, spaces) become ``_``; a name two servers share is
  prefixed with each server's label (``web_search``, ``github_search``); a clash left within one server
  gets ``_2``, ``_3``, and names valid as sent keep theirs. Calls send the original name.
- **effect**, reading absent hints with the spec's defaults (``readOnlyHint`` false, ``destructiveHint``
  true, ``idempotentHint`` false): read-only is ``read``; otherwise destructive is ``destructive``, so a
  tool that says nothing is destructive, as the spec asks clients to assume. An additive
  (``destructiveHint: false``) idempotent tool is ``mutate-reversible`` (MCP has no reversibility hint; a
  change that repeats harmlessly is the nearest thing), an additive one that is not ``mutate-irreversible``.
- **dedupe** only for read-only or idempotent tools: sending an email twice is two emails.
- **claims**: read-only tools share a read claim on ``mcp:<label>`` so they run together; the others have
  none, so each runs alone in a parallel batch.
- **parameters** are the ``inputSchema`` as sent (the loop sanitises schemas); **label** is the server's.

Results: text stays text, images become ``ImagePart`` data URLs, embedded resources become text headed by
their URI, ``structuredContent`` goes to ``details["structured_content"]``, ``isError`` to ``is_error``.
A JSON-RPC error or a lost connection raises ``MCPError`` (the execution engine turns it into an error
result); so does a server that cannot start, naming the command and the tail of its stderr.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, TextIO, cast

try:
    import anyio
    import httpx2
    import mcp.types as mt
    from mcp import Client, StdioServerParameters
    from mcp.client import Transport
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.shared.exceptions import MCPError as _SDKError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("MCP support needs the MCP SDK: pip install 'steadyloop[mcp]'") from exc

from ..errors import InvalidInput, SteadyloopError
from ._mcp_mapping import assign_names, cancelled_result, effect_of, to_result
from .definition import ResourceClaim, Tool, ToolContext, ToolResult

__all__ = ["MCPConnection", "MCPError", "MCPServerSpec", "MCPToolset", "mcp_tools"]

_STDERR_TAIL = 2000
_MAX_PAGES = 100  # a server whose cursor never ends must not hang the listing


class MCPError(SteadyloopError):
    """An MCP server could not be started or reached, or answered a request with an error.

    Attributes:
        server: the server's label.
        code: the JSON-RPC error code, when the server sent one.
        stderr: the tail of a stdio server's stderr ("" for HTTP servers or when it wrote nothing).
    """

    def __init__(self, message: str, *, server: str, code: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.code = code
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class MCPServerSpec:
    """Where an MCP server is: a command to run (stdio) or a URL (streamable HTTP).

    Attributes:
        name: a short label for the server; tools carry it as ``label`` and it prefixes clashing names.
        command: the executable of a stdio server.
        args: its arguments.
        env: extra environment variables, added to the small set the SDK passes on (``PATH``, ``HOME``, ...).
        cwd: the working directory of the server process.
        url: the endpoint of a streamable HTTP server.
        headers: HTTP headers sent with every request (authorization, ...).
        connect_timeout: seconds the start and handshake may take.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    connect_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidInput("an MCP server needs a name")
        if (self.command is None) == (self.url is None):
            raise InvalidInput(f"MCP server {self.name!r}: give either a command or a url")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise InvalidInput(f"MCP server {self.name!r}: args, env and cwd apply to a command, not a url")
        if self.command is not None and self.headers:
            raise InvalidInput(f"MCP server {self.name!r}: headers apply to a url, not a command")
        # Callers pass lists; a tuple keeps the spec frozen all the way down.
        object.__setattr__(self, "args", tuple(self.args))

    @classmethod
    def from_command_line(
        cls,
        command_line: str,
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> MCPServerSpec:
        """A stdio server from one shell-style line, ``"npx -y some-server --flag"``.

        Args:
            command_line: split with ``shlex``; no shell runs it.
            name: the label; defaults to the executable's file name.

        Raises:
            InvalidInput: the line is empty, has a quote left open, or holds a NUL (no process can be
                started with one).
        """
        if "\x00" in command_line:
            raise InvalidInput("an MCP server command line cannot hold a NUL character")
        try:
            words = shlex.split(command_line)
        except ValueError as exc:  # a quote or an escape left open
            raise InvalidInput(f"cannot split the MCP server command line {command_line!r}: {exc}") from None
        if not words:
            raise InvalidInput("an MCP server command line cannot be empty")
        return cls(
            name=name or os.path.basename(words[0]), command=words[0], args=tuple(words[1:]), env=env, cwd=cwd
        )

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` for a command, ``"http"`` for a URL."""
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """The command line or the URL, for messages."""
        if self.command is not None:
            return shlex.join([self.command, *self.args])
        return str(self.url)


class MCPConnection:
    """One live connection to an MCP server.

    ``async with MCPConnection(spec) as conn: tools = await conn.list_tools()``

    The SDK's transports live in anyio task groups, which must be entered and left by the same task; the
    connection therefore keeps them on a runner task of its own, so ``connect`` and ``close`` may come
    from different tasks and calls from any task of the same event loop.
    """

    def __init__(self, spec: MCPServerSpec) -> None:
        self.spec = spec
        self._client: Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._stderr: TextIO | None = None
        self._lost: BaseException | None = None

    async def __aenter__(self) -> MCPConnection:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Start (or reach) the server and complete the MCP handshake.

        Raises:
            MCPError: the server did not start, could not be reached, or failed the handshake in time.
        """
        if self._runner is not None:
            raise InvalidInput(f"MCP server {self.spec.name!r}: already connected")
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._runner = asyncio.create_task(self._run(ready), name=f"mcp:{self.spec.name}")
        try:
            async with asyncio.timeout(self.spec.connect_timeout):
                self._client = await ready
        except Exception as exc:
            # Read the stderr tail before stopping: stopping closes the file it is in.
            if isinstance(exc, TimeoutError):
                error = await self._error(f"no answer within {self.spec.connect_timeout:g}s", None)
            elif isinstance(_leaf(exc), _SDKError):
                error = await self._error("the MCP handshake failed", exc)
            else:
                error = await self._error(f"could not {'start' if self._stderr else 'reach'} it", exc)
            await self._stop()
            raise error from exc
        except BaseException:
            await self._stop()
            raise

    async def close(self) -> None:
        """Leave the session and stop the server (a stdio server gets its stdin closed, then a signal)."""
        self._closing.set()
        if self._runner is not None and not self._runner.done():
            # wait(), not await: the runner's own failure or cancellation is not the closer's to raise.
            await asyncio.wait([self._runner])
        self._client = None
        if self._stderr is not None:
            self._stderr.close()

    def stderr_tail(self) -> str:
        """The last lines a stdio server wrote to stderr (it is captured, not shown)."""
        if self._stderr is None or self._stderr.closed:
            return ""
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - _STDERR_TAIL)
        # pread leaves the shared file offset alone: the server writes through a duplicate of this descriptor.
        return os.pread(fd, size - start, start).decode("utf-8", errors="replace").strip()

    async def list_tools(self) -> list[Tool]:
        """The server's tools as ``Tool`` values (names made valid and unique within this server)."""
        return _build_tools([(self, await self._listing())])

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        cancelled: asyncio.Event | None = None,
        *,
        context: ToolContext | None = None,
    ) -> ToolResult:
        """Call a tool by its MCP name.

        Args:
            name: the tool's name as the server spells it.
            arguments: the call's arguments.
            cancelled: when set, the request is cancelled (the server gets ``notifications/cancelled``)
                and the call returns an error result saying so; the connection stays up.
            context: the steadyloop call context; the server's progress notifications go to its
                ``progress`` callback.

        Raises:
            MCPError: the server answered with a JSON-RPC error, or the connection is lost.
        """
        client = await self._live_client()
        if cancelled is not None and cancelled.is_set():
            return cancelled_result(self.spec.name, name)
        scope = anyio.CancelScope()
        watcher = None
        if cancelled is not None:
            # Owned here and cancelled in the finally below; not awaited so a cancellation of this task
            # is never swallowed.
            watcher = asyncio.create_task(_cancel_when_set(cancelled, scope))
        result: mt.CallToolResult | None = None
        try:
            with scope:
                result = await client.call_tool(
                    name, dict(arguments), progress_callback=_progress_to(context) if context else None
                )
        except Exception as exc:
            raise await self._error(f"tools/call {name!r} failed", exc) from exc
        finally:
            if watcher is not None:
                watcher.cancel()
        if result is None:
            return cancelled_result(self.spec.name, name)
        return to_result(result, self.spec.name, name)

    # -- internals ------------------------------------------------------------------------------------

    async def _run(self, ready: asyncio.Future[Client]) -> None:
        """Own the transport and session from entry to exit, in this one task."""
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(await self._transport(stack), cache=None))
                if ready.done():  # the caller gave up while we were connecting
                    return
                ready.set_result(client)
                await self._closing.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                self._lost = exc
        finally:
            if not ready.done():
                ready.cancel()

    async def _transport(self, stack: AsyncExitStack) -> Transport:
        spec = self.spec
        if spec.command is not None:
            self._stderr = _stderr_file()
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env or {}), cwd=spec.cwd
            )
            return stdio_client(params, errlog=self._stderr)
        http = await stack.enter_async_context(
            # The read timeout is long because a server may hold a response stream open while a tool runs.
            httpx2.AsyncClient(headers=dict(spec.headers or {}), timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return streamable_http_client(str(spec.url), http_client=http)

    async def _stop(self) -> None:
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
            await asyncio.wait([self._runner])
        if self._stderr is not None:
            self._stderr.close()

    async def _live_client(self) -> Client:
        if self._client is None or self._runner is None or self._runner.done():
            raise await self._error("the connection is closed", self._lost)
        return self._client

    async def _listing(self) -> list[mt.Tool]:
        client = await self._live_client()
        tools: list[mt.Tool] = []
        cursor: str | None = None
        try:
            for _ in range(_MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as exc:
            raise await self._error("tools/list failed", exc) from exc
        return tools

    async def _error(self, what: str, cause: BaseException | None) -> MCPError:
        stderr = await asyncio.to_thread(self.stderr_tail)
        leaf = _leaf(cause) if cause is not None else None
        code = leaf.code if isinstance(leaf, _SDKError) else None
        message = f"MCP server {self.spec.name!r} ({self.spec.describe()}): {what}"
        if leaf is not None:
            message += f": {leaf}" if str(leaf) else f": {type(leaf).__name__}"
        if stderr:
            message += f"\n--- its stderr, last lines ---\n{stderr}"
        return MCPError(message, server=self.spec.name, code=code, stderr=stderr)


@dataclass(slots=True)
class MCPToolset:
    """Tools from several MCP servers, and the connections that serve them.

    Attributes:
        tools: every server's tools, names unique across servers.
        connections: one per server, in the order given.
    """

    tools: list[Tool]
    connections: list[MCPConnection] = field(default_factory=list)

    async def __aenter__(self) -> MCPToolset:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection."""
        await asyncio.gather(*(conn.close() for conn in self.connections))


async def mcp_tools(*specs: MCPServerSpec) -> MCPToolset:
    """Connect to several MCP servers at once and gather their tools.

    ``async with await mcp_tools(spec_a, spec_b) as toolset: agent = Agent(tools=toolset.tools)``

    Raises:
        InvalidInput: two servers share a label.
        MCPError: a server failed to connect or list its tools; the ones that did are closed again.
    """
    labels = [spec.name for spec in specs]
    if len(set(labels)) != len(labels):
        raise InvalidInput(f"MCP server labels must be unique, got {labels}")
    connections = [MCPConnection(spec) for spec in specs]
    try:
        async with asyncio.TaskGroup() as group:
            for conn in connections:
                group.create_task(conn.connect())
        listings = [await conn._listing() for conn in connections]
    except BaseException as exc:
        await asyncio.gather(*(conn.close() for conn in connections))
        if isinstance(exc, BaseExceptionGroup):
            raise _leaf(exc) from None
        raise
    return MCPToolset(
        tools=_build_tools(list(zip(connections, listings, strict=True))), connections=connections
    )


# -- mapping ----------------------------------------------------------------------------------------------


def _build_tools(listings: Sequence[tuple[MCPConnection, Sequence[mt.Tool]]]) -> list[Tool]:
    entries = [(conn, item) for conn, items in listings for item in items]
    names = assign_names([(conn.spec.name, item.name) for conn, item in entries])
    return [_to_tool(conn, item, name) for (conn, item), name in zip(entries, names, strict=True)]


def _to_tool(conn: MCPConnection, item: mt.Tool, name: str) -> Tool:
    server, original = conn.spec.name, item.name
    effect, dedupe = effect_of(item.annotations)
    title = item.title or (item.annotations.title if item.annotations else None)

    async def execute(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return await conn.call(original, arguments, context.cancelled, context=context)

    return Tool(
        name=name,
        description=item.description or title or "",
        parameters=item.input_schema,
        execute=execute,
        effect=effect,
        claims=[ResourceClaim(f"mcp:{server}", "read")] if effect == "read" else None,
        dedupe=dedupe,
        idempotent=dedupe,  # read-only or idempotent by its hints: safe to run again
        label=server,
    )


def _progress_to(context: ToolContext) -> ProgressFnT:
    async def report(progress: float, total: float | None, message: str | None) -> None:
        context.progress(message or (f"{progress:g}/{total:g}" if total else f"{progress:g}"))

    return report


async def _cancel_when_set(event: asyncio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    # Cancelling the SDK request through anyio (not Task.cancel) lets its shielded courtesy
    # notifications/cancelled go out before the call unwinds.
    scope.cancel()


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the exception groups anyio task groups wrap errors in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _stderr_file() -> TextIO:
    # A real file, not a pipe: the server writes to it directly and nobody has to drain it.
    # Closed by MCPConnection.close; typeshed calls it IO[str], and it is a text file.
    return cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
