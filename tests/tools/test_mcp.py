"""MCP client: real servers as subprocesses, over stdio and streamable HTTP on loopback.

Two servers: ``mcp_server_fixture.py`` (written here with the SDK's ``MCPServer``), run over stdio and over
streamable HTTP, and ``mcp-server-time`` from PyPI, which works offline.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import mcp.types as mt
import pytest

from steadyloop.errors import InvalidInput, SteadyloopError
from steadyloop.messages import ImagePart, TextPart
from steadyloop.tools._mcp_mapping import assign_names, effect_of, to_result
from steadyloop.tools.definition import ResourceClaim, Tool, ToolContext, ToolResult
from steadyloop.tools.mcp import MCPConnection, MCPError, MCPServerSpec, mcp_tools

FIXTURE = Path(__file__).with_name("mcp_server_fixture.py")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WAIT = 20.0  # generous ceiling for anything awaited on an event; never a sleep


def _stdio_spec(name: str = "fixture") -> MCPServerSpec:
    return MCPServerSpec(name=name, command=sys.executable, args=(str(FIXTURE),))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The fixture server over streamable HTTP, started once for the module; ready when uvicorn says so."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE), "http", str(port)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if "Uvicorn running" in line:
            break
    else:
        proc.wait()
        pytest.fail("the HTTP fixture server did not start:\n" + "".join(seen))
    # Keep draining its log so the server never blocks on a full pipe.
    drain = threading.Thread(target=proc.stderr.read, daemon=True)
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT)
        drain.join(timeout=WAIT)
        proc.stderr.close()


@pytest.fixture(params=["stdio", "http"])
def spec(request: pytest.FixtureRequest) -> MCPServerSpec:
    if request.param == "stdio":
        return _stdio_spec()
    return MCPServerSpec(name="fixture", url=request.getfixturevalue("http_url"))


@pytest.fixture
async def conn(spec: MCPServerSpec) -> AsyncIterator[MCPConnection]:
    async with MCPConnection(spec) as connection:
        yield connection


async def _tools(conn: MCPConnection) -> dict[str, Tool]:
    return {tool.name: tool for tool in await conn.list_tools()}


async def _run(tool: Tool, arguments: dict[str, object], context: ToolContext | None = None) -> ToolResult:
    return ToolResult.of(await tool.execute(arguments, context or ToolContext(call_id="c1", name=tool.name)))


# -- mapping ------------------------------------------------------------------------------------------


async def test_tools_are_mapped_with_names_effects_and_dedupe(conn: MCPConnection) -> None:
    tools = await _tools(conn)
    assert set(tools) >= {"echo", "add", "files_read", "files_read_2", "delete_file", "set_flag", "send_note"}
    expected = {
        "echo": ("read", True),
        "add": ("read", True),
        "files_read_2": ("read", True),
        "delete_file": ("destructive", False),
        "set_flag": ("mutate-reversible", True),
        "send_note": ("mutate-irreversible", False),
        "unannotated": ("destructive", False),
        "slow": ("destructive", False),
    }
    assert {name: (tools[name].effect, tools[name].dedupe) for name in expected} == expected
    assert tools["echo"].claims == [ResourceClaim("mcp:fixture", "read")]
    assert tools["delete_file"].claims is None
    assert tools["send_note"].claims is None
    echo = tools["echo"]
    assert echo.label == "fixture"
    assert echo.description == "Return the text unchanged."
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]


async def test_a_renamed_tool_calls_its_original_name(conn: MCPConnection) -> None:
    tools = await _tools(conn)
    # "files_read" was valid as sent and keeps its name; "files.read" maps onto it and gets the suffix.
    assert (await _run(tools["files_read"], {"path": "a"})).content == "plain:a"
    assert (await _run(tools["files_read_2"], {"path": "a"})).content == "dotted:a"


@pytest.mark.parametrize(
    ("annotations", "effect", "dedupe"),
    [
        (None, "destructive", False),
        (mt.ToolAnnotations(), "destructive", False),
        (mt.ToolAnnotations(read_only_hint=True), "read", True),
        (mt.ToolAnnotations(read_only_hint=True, destructive_hint=True), "read", True),
        (mt.ToolAnnotations(read_only_hint=False), "destructive", False),
        (mt.ToolAnnotations(idempotent_hint=True), "destructive", True),
        (mt.ToolAnnotations(destructive_hint=True, idempotent_hint=True), "destructive", True),
        (mt.ToolAnnotations(destructive_hint=False), "mutate-irreversible", False),
        (mt.ToolAnnotations(destructive_hint=False, idempotent_hint=True), "mutate-reversible", True),
        (mt.ToolAnnotations(destructive_hint=False, idempotent_hint=False), "mutate-irreversible", False),
    ],
)
def test_effect_follows_the_spec_defaults(
    annotations: mt.ToolAnnotations | None, effect: str, dedupe: bool
) -> None:
    assert effect_of(annotations) == (effect, dedupe)


def test_names_are_made_valid_and_unique() -> None:
    entries = [
        ("fs", "read file"),
        ("fs", "dir/list"),
        ("fs", "files.read"),
        ("fs", "files_read"),
        ("web", "search"),
        ("git hub", "search"),
        ("fs", "x" * 80),
        ("fs", "x" * 70),
        ("fs", "!!!"),
    ]
    names = assign_names(entries)
    assert names[:6] == [
        "read_file",
        "dir_list",
        "files_read_2",
        "files_read",
        "web_search",
        "git_hub_search",
    ]
    assert names[6] == "x" * 64
    assert names[7] == "x" * 62 + "_2"
    assert names[8] == "___"
    assert len(set(names)) == len(names)
    for name in names:  # every one passes Tool's own check
        Tool(name=name, description="", parameters={}, execute=_never)


async def _never(arguments: dict[str, object], context: ToolContext) -> object:
    raise AssertionError("not called")


# -- results ------------------------------------------------------------------------------------------


async def test_results_carry_text_structured_content_images_resources_and_errors(conn: MCPConnection) -> None:
    echo = await conn.call("echo", {"text": "hi"})
    assert (echo.content, echo.is_error) == ("hi", False)
    assert echo.details["server"] == "fixture"

    add = await conn.call("add", {"a": 1, "b": 2})
    assert add.content == "3"
    assert add.details["structured_content"] == {"result": 3}

    picture = await conn.call("picture", {})
    assert isinstance(picture.content, tuple)
    caption, image = picture.content
    assert caption == TextPart("a red dot")
    assert isinstance(image, ImagePart)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.url.split(",", 1)[1]) == PNG

    document = await conn.call("document", {})
    assert document.content == "[resource file:///notes.txt]\nhello from a resource"

    failed = await conn.call("fail", {"reason": "because"})
    assert failed.is_error
    assert "failed on purpose: because" in str(failed.content)


def test_every_content_block_kind_maps_to_parts() -> None:
    png = base64.b64encode(PNG).decode("ascii")
    result = mt.CallToolResult(
        content=[
            mt.TextContent(text="text"),
            mt.AudioContent(data="AAAA", mime_type="audio/wav"),
            mt.ResourceLink(name="log", uri="file:///log.txt", description="the log"),
            mt.EmbeddedResource(
                resource=mt.BlobResourceContents(uri="file:///a.png", blob=png, mime_type="image/png")
            ),
            mt.EmbeddedResource(resource=mt.BlobResourceContents(uri="file:///a.bin", blob="AAAA")),
        ],
        is_error=True,
    )
    mapped = to_result(result, "srv", "tool")
    assert mapped.is_error
    assert mapped.content == (
        TextPart("text"),
        TextPart("[audio (audio/wav) not shown]"),
        TextPart("[resource file:///log.txt: the log]"),
        TextPart("[resource file:///a.png]"),
        ImagePart(url=f"data:image/png;base64,{png}"),
        TextPart("[resource file:///a.bin (application/octet-stream), binary, not shown]"),
    )
    assert mapped.details == {"server": "srv", "tool": "tool"}


def test_structured_content_alone_is_shown_to_the_model_as_json() -> None:
    mapped = to_result(mt.CallToolResult(content=[], structured_content={"n": 1}), "srv", "tool")
    assert mapped.content == '{"n": 1}'
    assert mapped.details["structured_content"] == {"n": 1}


async def test_a_json_rpc_error_raises_mcp_error(conn: MCPConnection) -> None:
    with pytest.raises(MCPError) as caught:
        await conn.call("protocol_error", {})
    assert caught.value.code == -32603
    assert "internal trouble" in str(caught.value)
    assert caught.value.server == "fixture"
    assert (await conn.call("echo", {"text": "still up"})).content == "still up"


# -- cancellation -------------------------------------------------------------------------------------


async def test_cancellation_reaches_the_server_and_keeps_the_connection(conn: MCPConnection) -> None:
    slow = (await _tools(conn))["slow"]
    started = asyncio.Event()
    progress: list[str] = []

    def on_progress(text: str) -> None:
        progress.append(text)
        started.set()

    context = ToolContext(call_id="c1", name="slow", progress=on_progress)
    call = asyncio.create_task(_run(slow, {"tag": "by-event"}, context))
    async with asyncio.timeout(WAIT):
        await started.wait()
        context.cancelled.set()
        result = await call
    assert progress == ["started"]
    assert result.is_error
    assert result.details["cancelled"] is True
    # The server's own handler saw the cancellation, and the connection still answers.
    assert (await conn.call("cancellations", {"tag": "by-event"})).content == "cancelled"


async def test_an_already_cancelled_call_is_not_sent(conn: MCPConnection) -> None:
    cancelled = asyncio.Event()
    cancelled.set()
    result = await conn.call("delete_file", {"path": "x"}, cancelled)
    assert result.is_error
    assert result.details["cancelled"] is True


async def test_cancelling_the_calling_task_propagates(conn: MCPConnection) -> None:
    started = asyncio.Event()
    context = ToolContext(call_id="c1", name="slow", progress=lambda _text: started.set())
    call = asyncio.create_task(conn.call("slow", {"tag": "by-task"}, context=context))
    async with asyncio.timeout(WAIT):
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert (await conn.call("cancellations", {"tag": "by-task"})).content == "cancelled"


# -- failures -----------------------------------------------------------------------------------------


async def test_a_crashed_server_raises_with_its_stderr() -> None:
    async with MCPConnection(_stdio_spec()) as conn:
        with pytest.raises(MCPError) as caught:
            await conn.call("crash", {})
        assert "crashing on request" in caught.value.stderr
        assert "crashing on request" in str(caught.value)
        with pytest.raises(MCPError):
            await conn.call("echo", {"text": "anyone?"})


async def test_a_missing_command_is_a_typed_error_naming_it() -> None:
    spec = MCPServerSpec(name="ghost", command="/nonexistent/mcp-server-ghost", args=("--flag",))
    with pytest.raises(MCPError) as caught:
        await MCPConnection(spec).connect()
    assert isinstance(caught.value, SteadyloopError)
    assert "/nonexistent/mcp-server-ghost --flag" in str(caught.value)
    assert caught.value.server == "ghost"


async def test_a_server_that_exits_at_start_shows_its_stderr() -> None:
    code = "import sys; sys.stderr.write('cannot start: MY_TOKEN is not set\\n'); sys.exit(2)"
    spec = MCPServerSpec(name="broken", command=sys.executable, args=("-c", code))
    with pytest.raises(MCPError) as caught:
        async with MCPConnection(spec):
            pass
    assert "MY_TOKEN is not set" in caught.value.stderr
    assert "MY_TOKEN is not set" in str(caught.value)
    assert "-c" in str(caught.value)


async def test_an_unreachable_url_is_a_typed_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    with pytest.raises(MCPError) as caught:
        await MCPConnection(MCPServerSpec(name="gone", url=url, connect_timeout=WAIT)).connect()
    assert url in str(caught.value)


async def test_a_closed_connection_refuses_calls() -> None:
    conn = MCPConnection(_stdio_spec())
    async with conn:
        pass
    with pytest.raises(MCPError, match="closed"):
        await conn.call("echo", {"text": "late"})


async def test_connect_and_close_may_happen_in_different_tasks() -> None:
    conn = MCPConnection(_stdio_spec())
    await asyncio.create_task(conn.connect())
    assert (await conn.call("echo", {"text": "x"})).content == "x"
    await asyncio.create_task(conn.close())


# -- several servers, and a published one -------------------------------------------------------------


async def test_mcp_tools_prefixes_names_that_clash_across_servers() -> None:
    async with await mcp_tools(_stdio_spec("a"), _stdio_spec("b")) as toolset:
        names = {tool.name: tool for tool in toolset.tools}
        assert {"a_echo", "b_echo", "a_files_read", "a_files_read_2", "b_files_read_2"} <= set(names)
        assert names["b_echo"].label == "b"
        assert names["b_echo"].claims == [ResourceClaim("mcp:b", "read")]
        assert (await _run(names["a_files_read_2"], {"path": "p"})).content == "dotted:p"
        assert (await _run(names["b_echo"], {"text": "from b"})).content == "from b"


async def test_mcp_tools_fails_whole_when_one_server_fails() -> None:
    bad = MCPServerSpec(name="ghost", command="/nonexistent/mcp-server-ghost")
    with pytest.raises(MCPError, match="ghost"):
        await mcp_tools(_stdio_spec(), bad)
    with pytest.raises(InvalidInput):
        await mcp_tools(_stdio_spec(), _stdio_spec())


async def test_the_published_time_server() -> None:
    command = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert command is not None, "pip install mcp-server-time (the dev extra lists it)"
    time_spec = MCPServerSpec.from_command_line(f"{command} --local-timezone UTC", name="time")
    async with await mcp_tools(time_spec, _stdio_spec()) as toolset:
        tools = {tool.name: tool for tool in toolset.tools}
        now = tools["get_current_time"]
        assert (now.label, now.effect, now.dedupe) == ("time", "read", True)
        assert "timezone" in now.parameters["properties"]
        assert "convert_time" in tools and "echo" in tools
        result = await _run(now, {"timezone": "UTC"})
        assert not result.is_error
        assert '"timezone": "UTC"' in result.content
        assert result.details["structured_content"]["timezone"] == "UTC"


# -- spec ---------------------------------------------------------------------------------------------


def test_spec_from_command_line_splits_like_a_shell() -> None:
    spec = MCPServerSpec.from_command_line("npx -y @scope/server --root '/my files'", env={"K": "v"})
    assert (spec.name, spec.command, spec.args) == (
        "npx",
        "npx",
        ("-y", "@scope/server", "--root", "/my files"),
    )
    assert spec.transport == "stdio"
    assert spec.env == {"K": "v"}
    assert spec.describe() == "npx -y @scope/server --root '/my files'"


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"command": "x", "url": "http://127.0.0.1/mcp"},
        {"url": "http://127.0.0.1/mcp", "args": ("a",)},
        {"command": "x", "headers": {"A": "b"}},
    ],
)
def test_spec_needs_exactly_one_transport(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        MCPServerSpec(name="s", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        MCPServerSpec.from_command_line("   ")
