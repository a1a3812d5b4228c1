"""One durable server node for the kill test, run as its own process: ``python durable_node.py MODEL_URL
STORE NODE PORT LEDGER_DIR SIGNAL_PORT [GATE [MAX_RUNS_PER_TOKEN]]``.

It serves like ``steadyloop serve --durable`` with two tools that write a line to a ledger file each time
they run (opened for appending, one write per line, so lines of two processes never mix):
``stamp_visit`` (not idempotent, so a call lost in flight must not run again) and ``look_up``
(idempotent, so it may). Each call also tells the test it has started, on a loopback socket, so the test
can kill the node while calls are in flight. No call waits for an approval. It offers ``run_shell`` too
(the CLI's shell tool, in the ledger's folder), whose commands' processes must end with the node.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from steadyloop import ApprovalPolicy, Endpoint, ToolContext, tool
from steadyloop.cli.tools import shell_tool
from steadyloop.server import ServerLimits, ServerSettings, serve
from steadyloop.tools import ResourceClaim


def ledger_tools(ledger: Path, node: str, signal_port: int) -> list[object]:
    async def write(name: str, context: ToolContext) -> None:
        line = f"{context.call_id} {node} {name}\n".encode()
        fd = os.open(ledger / f"{name}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        _, writer = await asyncio.open_connection("127.0.0.1", signal_port)
        writer.write(line)
        await writer.drain()
        writer.close()

    @tool(effect="mutate-irreversible", dedupe=False)
    async def stamp_visit(visitor: str, context: ToolContext) -> str:
        """Stamp a visitor's card; each stamp is one more stamp.

        Args:
            visitor: who.
        """
        await write("stamp_visit", context)
        await asyncio.sleep(3.0)  # long enough for a kill to land while calls are in flight
        return f"stamped {visitor}"

    # Lookups read the records together: several in one answer run at once (a stamp runs alone, after them).
    @tool(effect="read", idempotent=True, claims=[ResourceClaim("records")])
    async def look_up(key: str, context: ToolContext) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        await write("look_up", context)
        await asyncio.sleep(0.5)
        return f"{key} is on file"

    return [stamp_visit, look_up, shell_tool(ledger)]


def main(
    model_url: str,
    store: str,
    node: str,
    port: str,
    ledger: str,
    signal_port: str,
    gate: str = "",
    max_runs: str = "200",
) -> None:
    settings = ServerSettings(
        endpoint=Endpoint(model_url),
        model="scripted",
        store=store,
        node=node,
        tools=ledger_tools(Path(ledger), node, int(signal_port)),  # type: ignore[arg-type]
        # With GATE set, a stamp waits for a decision posted over HTTP.
        approval_policy=ApprovalPolicy(require_for=frozenset({"mutate-irreversible"} if gate else set())),
        limits=ServerLimits(max_runs_per_token=int(max_runs)),
        durable=True,
        page=False,
    )
    serve(settings, host="127.0.0.1", port=int(port), log_level="info")


if __name__ == "__main__":
    main(*sys.argv[1:9])
