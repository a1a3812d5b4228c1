"""Durable server nodes for the durable-run tests: real ``steadyloop serve --durable`` processes
(``durable_node.py``) on one PostgreSQL store and the scripted model server, the HTTP clients that talk to
them, and the readers and checks of a session's record those tests share."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import httpx2 as httpx

from steadyloop.server.cutoff import HANDOVER
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

from .conftest import free_port, read_sse

NODE = Path(__file__).with_name("durable_node.py")
_numbers = itertools.count(1)

Seen = list[tuple[int, str, str]]  # a session's recorded events as a watcher saw them: (seq, kind, JSON data)
Started = tuple[asyncio.subprocess.Process, asyncio.Task[None]]  # a node's process and its log's drain


def respond(request: RecordedRequest) -> ScriptedReply:
    """The model: looks the case up, then stamps the visitor's card, then answers. Each reply carries
    the request's number, so the kept transcript says which request each answer came from."""
    number = next(_numbers)
    messages = request.json["messages"]
    tools_done = sum(1 for m in messages if m["role"] == "tool")
    case = re.search(r"case (\d+)", next(m["content"] for m in messages if m["role"] == "user"))
    assert case is not None
    if tools_done == 0:
        call = {"id": f"call_r{number}", "name": "look_up", "arguments": {"key": f"case-{case[1]}"}}
    elif tools_done == 1:
        call = {"id": f"call_r{number}", "name": "stamp_visit", "arguments": {"visitor": f"v{case[1]}"}}
    else:
        return Reply.stream(
            [*text_chunks(["Done ", "with ", f"case {case[1]} [r{number}]"]), usage_chunk(50, 8)]
        )
    return Reply.stream([*tool_call_chunks([call], split_arguments_every=4), usage_chunk(30, 9)], delay=0.01)


async def start_node(
    model_url: str,
    store: str,
    ledger: Path,
    port: int,
    node: str,
    signals: int,
    gate: str = "",
    max_runs: int = 200,
) -> Started:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(NODE), model_url, store, node, str(port), str(ledger), str(signals), gate,
        str(max_runs),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    stderr = process.stderr
    seen: list[str] = []
    try:
        while line := (await asyncio.wait_for(stderr.readline(), 120)).decode():
            seen.append(line)
            if "Uvicorn running on" in line:  # started, and listening (a port taken meanwhile fails here)
                kept = os.environ.get("STEADYLOOP_TEST_NODE_LOGS")  # a folder to keep the nodes' logs in
                log = Path(kept) / f"{node}.{port}.log" if kept else None
                _keep(log, "".join(seen).encode())

                return process, asyncio.create_task(_drain(stderr, log))
    except BaseException:
        await _reap(process)
        raise
    # A node that did not start is reaped before the test goes on: left to the garbage collector after its
    # test's event loop closed, it was reported as a process still running in whichever test came next.
    await _reap(process)
    raise AssertionError("the node did not start:\n" + "".join(seen))


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Wait for a node that is ending (its log closed), and kill it if it has not within 30 s."""
    try:
        await asyncio.wait_for(process.wait(), 30)
    except TimeoutError:
        process.kill()
        await process.wait()


async def _drain(stderr: asyncio.StreamReader, log: Path | None) -> None:
    """Read a node's log on, so it never blocks writing into a full pipe (kept in ``log``, if given)."""
    while line := await stderr.readline():
        _keep(log, line)


def _keep(log: Path | None, data: bytes) -> None:
    if log is not None:
        with log.open("ab") as out:
            out.write(data)


async def stop(nodes: list[Started]) -> None:
    """Stop the nodes still going: gracefully, or, after a minute (a test that failed may leave a node
    waiting on a request that never ends), with SIGKILL."""
    for process, drain in nodes:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(process.wait(), 60)
            except TimeoutError:
                process.kill()
                await process.wait()
        drain.cancel()


class Nodes:
    """Durable nodes on one store and one scripted model server, each with a client of its own.

    Attributes:
        model: the scripted model server every node asks.
        ledger: the folder of the tools' ledgers (``look_up.log``, ``stamp_visit.log``).
        clients: one client a node started, in the order they started.
        started: each node's process, in the same order.
    """

    def __init__(
        self,
        model: ScriptedServer,
        store: str,
        ledger: Path,
        signal_port: int,
        gate: str,
        max_runs: int,
        limits: httpx.Limits | None,
    ) -> None:
        self.model = model
        self.ledger = ledger
        self.clients: list[httpx.AsyncClient] = []
        self.started: list[Started] = []
        self._store = store
        self._signal_port = signal_port
        self._gate = gate
        self._max_runs = max_runs
        self._limits = limits

    async def start(self, name: str, store: str | None = None) -> httpx.AsyncClient:
        """Start a node called ``name`` on a free port (a node restarted under its name gets a new one: the
        killed node's connections may still hold the old), on ``store`` if given (the same database
        through a proxy of its own, say); returns the client that talks to it."""
        port = free_port()
        self.started.append(
            await start_node(
                self.model.base_url,
                store or self._store,
                self.ledger,
                port,
                name,
                self._signal_port,
                self._gate,
                self._max_runs,
            )
        )
        pool = {} if self._limits is None else {"limits": self._limits}
        http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120, **pool)
        self.clients.append(http)
        return http

    async def kill(self, index: int = 0) -> None:
        """SIGKILL the node started ``index``-th, and wait until it is gone."""
        process = self.started[index][0]
        process.send_signal(signal.SIGKILL)
        await process.wait()

    def ran(self, tool: str) -> list[list[str]]:
        """The ``tool``'s ledger: a line a call that started, as [call id, node, tool]."""
        return [line.split() for line in (self.ledger / f"{tool}.log").read_text().splitlines()]


@contextlib.asynccontextmanager
async def durable_nodes(
    tmp_path: Path,
    store: str,
    model: Callable[[RecordedRequest], ScriptedReply] = respond,
    *,
    names: Sequence[str] = ("node-a", "node-b"),
    stores: Mapping[str, str] | None = None,
    heard: Callable[[list[str]], None] | None = None,
    gate: str = "",
    max_runs: int = 200,
    limits: httpx.Limits | None = None,
) -> AsyncIterator[Nodes]:
    """Nodes called ``names`` on ``store`` (a node named in ``stores`` on the URL given there), serving what
    the scripted ``model`` answers; their tools keep their ledgers in ``tmp_path/ledger``. Each tool call,
    as it starts, hands ``heard`` its ledger line split in words (call id, node, tool). With ``gate`` set,
    a stamp waits for an approval; each node takes at most ``max_runs`` runs a token; ``limits``, where
    given, bounds each client's connections. The clients close and the nodes stop when the context ends."""
    global _numbers
    _numbers = itertools.count(1)  # each test's model numbers its requests from 1, as its server counts them
    ledger = tmp_path / "ledger"
    ledger.mkdir()

    async def tell(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readline()).decode().split()
        writer.close()
        if heard is not None:
            heard(line)

    signals = await asyncio.start_server(tell, "127.0.0.1", 0)
    async with signals, ScriptedServer(respond=model) as server:
        nodes = Nodes(server, store, ledger, signals.sockets[0].getsockname()[1], gate, max_runs, limits)
        try:
            for name in names:
                await nodes.start(name, (stores or {}).get(name))
            yield nodes
        finally:
            for http in nodes.clients:
                await http.aclose()
            await stop(nodes.started)


async def post(http: httpx.AsyncClient, sid: str, index: int) -> None:
    # The node may be killed under this request: the run goes on elsewhere.
    with contextlib.suppress(httpx.TransportError):
        await http.post(f"/sessions/{sid}/messages", json={"text": f"please handle case {index}"})


async def watch(clients: list[httpx.AsyncClient], first: int, sid: str) -> Seen:
    """The session's recorded events until a run completes, from node ``first``; when that node's
    connection breaks, from the other one, after the last seq seen."""
    seen: Seen = []
    node = first
    for _attempt in range(20):
        after = seen[-1][0] if seen else 0
        try:
            async with clients[node].stream(
                "GET", f"/sessions/{sid}/events", params={"after": after, "follow": "session"}
            ) as response:
                assert response.status_code == 200
                async for event in read_sse(response):
                    if event.id is None:
                        continue  # a delta: not in the record, and not resumable
                    seen.append((event.id, event.event, json.dumps(event.data, sort_keys=True)))
                    if event.event == "agent_end" and not handed_over(event.data):
                        assert event.data["outcome"] == "completed", event.data
                        return seen
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        node = 1 - node
    raise AssertionError(f"session {sid}: no completed run seen")


async def follow(http: httpx.AsyncClient, sid: str, seen: Seen, news: asyncio.Event) -> None:
    """The session's record from its start, into ``seen`` (``news`` set at each event), until a run
    ends (a run another node goes on with has not ended)."""
    params = {"after": 0, "follow": "session"}
    async with http.stream("GET", f"/sessions/{sid}/events", params=params) as response:
        assert response.status_code == 200
        async for event in read_sse(response):
            if event.id is None:
                continue
            seen.append((event.id, event.event, json.dumps(event.data, sort_keys=True)))
            news.set()
            if event.event == "agent_end" and not handed_over(event.data):
                return


async def until(test: Callable[[], bool], news: asyncio.Event, deadline_s: float) -> None:
    """Wait until ``test()`` holds, looking again each time ``news`` is set, for at most ``deadline_s``."""
    async with asyncio.timeout(deadline_s):
        while not test():
            news.clear()
            await news.wait()


def handed_over(end: dict[str, object]) -> bool:
    """Whether an ``agent_end`` closes a run that another node goes on with."""
    return str(end.get("error") or "").startswith(HANDOVER)


def ends(seen: Seen) -> list[dict[str, object]]:
    return [json.loads(data) for _, kind, data in seen if kind == "agent_end"]


def assert_all_closed(events: Seen) -> None:
    """Each run's record closes all it opens: its agent, each turn, each message, each tool execution."""
    pairs = {
        "agent_start": "agent_end",
        "turn_start": "turn_end",
        "message_start": "message_end",
        "tool_execution_start": "tool_execution_end",
    }
    opened: dict[tuple[str, str], int] = {}
    for seq, kind, data in events:
        body = json.loads(data)
        run = str(body.get("run_id"))
        for start, end in pairs.items():
            key = body.get("call_id") if start == "tool_execution_start" else ""
            if kind == start:
                opened[run, f"{start} {key}"] = opened.get((run, f"{start} {key}"), 0) + 1
            elif kind == end:
                opened[run, f"{start} {key}"] = opened.get((run, f"{start} {key}"), 0) - 1
                assert opened[run, f"{start} {key}"] >= 0, f"run {run}: {kind} at seq {seq} closes nothing"
    left = {key: count for key, count in opened.items() if count}
    assert not left, f"left open: {left}"


def asked(seen: Seen) -> list[str]:
    return [json.loads(data)["approval_id"] for _, kind, data in seen if kind == "approval_required"]


def assert_messages_closed(events: Seen) -> None:
    """Each run's stream closes every message it opens, one message at a time."""
    open_in: dict[str, int] = {}
    for seq, kind, data in events:
        if kind in ("message_start", "message_end"):
            run = json.loads(data)["run_id"]
            open_in[run] = open_in.get(run, 0) + (1 if kind == "message_start" else -1)
            assert open_in[run] in (0, 1), f"run {run}: {kind} at seq {seq} with {open_in[run]} open"
    assert not any(open_in.values()), f"messages left open: {open_in}"


def assert_each_once_in_order(seen: Seen) -> None:
    """A watcher that followed the record from its start saw every event once, in order."""
    ids = [seq for seq, _, _ in seen]
    assert ids == list(range(1, len(ids) + 1)), "the watcher saw every event once, in order"
