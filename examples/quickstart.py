"""Stream one answer from the bundled local model (installed and started on first use, cached after).

Run: ``.venv/bin/python examples/quickstart.py "your question"``. The model is the one every entry point
serves (Qwen2.5-Coder-1.5B-Instruct), or the one ``STEADYLOOP_LOCAL_MODEL`` names.
"""

from __future__ import annotations

import asyncio
import sys

from steadyloop.local import LocalServerConfig, running_server
from steadyloop.turn import run_turn
from steadyloop.wire.endpoints import Endpoint


def _progress(event: str, done: int | None, total: int | None) -> None:
    shown = f" {done}/{total}" if done is not None and total else ""
    print(f"[local model] {event}{shown}", file=sys.stderr)


async def main(question: str) -> None:
    with running_server(LocalServerConfig(), progress=_progress) as server:
        endpoint = Endpoint(server.base_url, api_key=server.api_key)
        turn = await run_turn(
            endpoint,
            {"model": server.model, "messages": [{"role": "user", "content": question}], "max_tokens": 200},
            on_output=lambda text: print(text, end="", flush=True),
        )
        print()
        print(
            f"[{turn.usage.prompt_tokens} prompt + {turn.usage.completion_tokens} completion tokens]",
            file=sys.stderr,
        )


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "In one sentence, what is an agent loop?"))
