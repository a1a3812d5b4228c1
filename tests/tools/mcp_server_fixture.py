"""A small MCP server for the MCP client tests, written with the SDK's server API (``MCPServer``).

Run ``python mcp_server_fixture.py`` for stdio, or ``python mcp_server_fixture.py http PORT`` for streamable
HTTP on 127.0.0.1. Its tools cover what the client maps: annotations, an image, a failing tool, a slow tool
that notices cancellation, names our ``Tool`` rejects (a dot, and one colliding with it once mapped),
structured output, an embedded resource, and a crash.
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents, ToolAnnotations

# One tiny opaque PNG (1x1), so the image test checks the bytes travel unchanged.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("fixture")

# Tags of slow calls whose cancellation the handler saw; events are made lazily (anyio needs a running loop).
_cancelled: dict[str, anyio.Event] = {}


def _cancel_seen(tag: str) -> anyio.Event:
    return _cancelled.setdefault(tag, anyio.Event())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(name="files.read", annotations=ToolAnnotations(read_only_hint=True))
def files_read_dotted(path: str) -> str:
    """Read a file (dotted name)."""
    return f"dotted:{path}"


@server.tool(name="files_read", annotations=ToolAnnotations(read_only_hint=True))
def files_read_plain(path: str) -> str:
    """Read a file (plain name)."""
    return f"plain:{path}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
def set_flag(flag: str) -> str:
    """Set a flag (additive and idempotent)."""
    return f"set {flag}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
def send_note(text: str) -> str:
    """Send a note (additive, twice is twice)."""
    return f"sent {text}"


@server.tool()
def unannotated() -> str:
    """A tool that says nothing about its effects."""
    return "ok"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> list[TextContent | ImageContent]:
    """Return a caption and a PNG image."""
    return [
        TextContent(text="a red dot"),
        ImageContent(data=base64.b64encode(PNG).decode("ascii"), mime_type="image/png"),
    ]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def document() -> EmbeddedResource:
    """Return an embedded text resource."""
    return EmbeddedResource(
        resource=TextResourceContents(uri="file:///notes.txt", text="hello from a resource")
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str) -> str:
    """Always fail with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def protocol_error() -> str:
    """Fail with a JSON-RPC error instead of an error result."""
    raise MCPError(code=-32603, message="internal trouble")


@server.tool()
async def slow(tag: str, ctx: Context) -> str:
    """Wait until cancelled; report progress first so the client knows the call has started."""
    await ctx.report_progress(0, 1, "started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _cancel_seen(tag).set()
        raise
    return "finished"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def cancellations(tag: str) -> str:
    """Say whether the slow call with this tag saw its cancellation (waits a little for it to arrive)."""
    with anyio.move_on_after(10):
        await _cancel_seen(tag).wait()
    return "cancelled" if _cancel_seen(tag).is_set() else "not cancelled"


@server.tool()
def crash() -> str:
    """Exit the server process abruptly, as a crashed server would."""
    sys.stderr.write("fixture: crashing on request\n")
    sys.stderr.flush()
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
