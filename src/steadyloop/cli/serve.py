"""``steadyloop serve``: the HTTP API and its web page, on the endpoint the other commands would use.

Tokens come from ``--token NAME=TOKEN`` (repeatable) and ``STEADYLOOP_SERVER_TOKENS`` (``NAME=TOKEN``
pairs separated by commas); a token given without a name belongs to ``default``. With none, the server
answers this machine only and refuses to listen anywhere else. Sessions may use the file tools of
``--workdir`` (writes wait for an approval on the page or over the API); ``--no-tools`` offers none.
``--transport httpx`` reads the model's streams through the SDK's httpx2 client instead of aiohttp.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from .. import configure_clients
from ..errors import InvalidInput
from ..spec import AgentSpec
from .config import Resolved
from .tools import file_tools, shell_tool

__all__ = ["check_open_bind", "parse_tokens", "serve_command"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOKEN = re.compile(r"[!-~]+")  # visible ASCII: what a bearer token in a header can be


def parse_tokens(given: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Bearer tokens by token, each naming its principal, from the flags and the environment.

    Raises:
        InvalidInput: a pair is empty, a name is not ``[A-Za-z0-9_-]{1,64}``, or a token holds a character
            no ``Authorization`` header can carry (a space, a control character, anything not ASCII).
    """
    env = os.environ if env is None else env
    pairs = [*given, *(p for p in env.get("STEADYLOOP_SERVER_TOKENS", "").split(",") if p.strip())]
    tokens: dict[str, str] = {}
    for pair in pairs:
        name, sep, token = pair.strip().partition("=")
        if not sep:
            name, token = "default", name
        if not token:
            raise InvalidInput("a token is NAME=TOKEN, or TOKEN alone")
        if _NAME.fullmatch(name) is None:
            raise InvalidInput(f"a token's name must be 1-64 of A-Z, a-z, 0-9, '_' or '-', not {name[:70]!r}")
        if _TOKEN.fullmatch(token) is None:
            # Its words, never the token: it is a secret, and only its name may be shown.
            raise InvalidInput(f"the token of {name!r} must be visible ASCII (no space or control character)")
        tokens[token] = name
    return tokens


def check_open_bind(host: str, tokens: Mapping[str, str]) -> None:
    """Refuse, before anything starts, to listen beyond loopback without a token.

    Raises:
        InvalidInput: ``host`` is not loopback and there is no token.
    """
    import ipaddress

    if tokens or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidInput(
            f"refusing to listen on {host} without a bearer token: pass --token NAME=TOKEN "
            "(or set STEADYLOOP_SERVER_TOKENS) to serve beyond this machine"
        )


def serve_command(
    resolved: Resolved,
    *,
    host: str,
    port: int,
    tokens: Mapping[str, str],
    workdir: Path,
    tools: bool,
    allow_shell: bool,
    store: str | None,
    spec: AgentSpec | None,
    max_runs: int = 16,
    node: str | None = None,
    transport: Literal["aiohttp", "httpx2"] = "aiohttp",
    durable: bool = False,
) -> int:
    """Serve until interrupted; returns the exit code.

    ``transport`` is the pool's for this process (``configure_clients``): every session's streams go
    through it.
    """
    try:
        from ..server import ServerLimits, ServerSettings, serve
    except ImportError as exc:
        raise InvalidInput("steadyloop serve needs its extra: pip install 'steadyloop[server]'") from exc
    configure_clients(transport=transport)
    offered = [*file_tools(workdir)] if tools else []
    if tools and allow_shell:
        offered.append(shell_tool(workdir))
    settings = ServerSettings(
        endpoint=resolved.endpoint,
        model=resolved.model,
        store=store,
        node=node or f"{socket.gethostname()}:{port}",
        tokens=dict(tokens),
        tools=offered,
        # ``resolved`` already went where the document's provider (or the flags) said.
        agent=None
        if spec is None
        else replace(spec, endpoint=replace(spec.endpoint, provider=None, failover=None)),
        context_length=resolved.context_length,
        limits=ServerLimits(max_runs_per_token=max_runs),
        durable=durable,
    )
    serve(settings, host=host, port=port)
    return 0
