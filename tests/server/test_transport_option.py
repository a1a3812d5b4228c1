"""``steadyloop serve --transport``: the model's streams go through the transport asked for.

The two transports introduce themselves differently (the aiohttp one as ``steadyloop/<version>``, the SDK's
httpx2 client as ``AsyncOpenAI/Python <version>``), which the scripted model server records.
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx2 as httpx
import pytest

from steadyloop.cli.app import build_parser
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import free_port, until_started

pytestmark = pytest.mark.timeout(180)


def test_the_transport_is_aiohttp_unless_asked() -> None:
    assert build_parser().parse_args(["serve"]).transport == "aiohttp"
    assert build_parser().parse_args(["serve", "--transport", "httpx"]).transport == "httpx"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--transport", "curl"])


@pytest.mark.parametrize(
    ("option", "agent"), [([], "steadyloop/"), (["--transport", "httpx"], "AsyncOpenAI/Python")]
)
async def test_a_served_run_streams_through_the_transport_asked_for(
    option: list[str], agent: str, tmp_path: os.PathLike[str]
) -> None:
    async with ScriptedServer(Reply.stream(stream_of("Through the pipe."))) as model:
        port = free_port()
        process = await asyncio.create_subprocess_exec(
            *(
                sys.executable,
                "-m",
                "steadyloop.cli",
                "serve",
                "--base-url",
                model.base_url,
                "-m",
                "scripted",
            ),
            *("--store", f"{tmp_path}/sessions.db", "--no-tools", "--port", str(port), *option),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
        )
        try:
            await until_started(process)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                session = (await http.post("/sessions", json={})).json()["id"]
                answer = await http.post(f"/sessions/{session}/messages", json={"text": "hi"})
                assert answer.status_code == 200, answer.text
                assert answer.json()["answer"] == "Through the pipe."
        finally:
            process.terminate()
            await process.wait()
    (chat,) = model.chat_requests
    assert (chat.header("user-agent") or "").startswith(agent)
