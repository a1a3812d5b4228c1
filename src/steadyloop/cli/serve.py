"""``steadyloop serve``: the HTTP API and its web page, on the endpoint the other commands would use.

Tokens come from ``--token NAME=TOKEN`` (repeatable) and ``STEADYLOOP_SERVER_TOKENS`` (``NAME=TOKEN``
pairs separated by commas); a token given without a name belongs to ``default``. With none, the server
answers this machine only and refuses to listen anywhere else. Sessions may use the file tools of
``--workdir`` (writes wait for an approval on the page or over the API); ``--no-tools`` offers none.
``--transport httpx`` reads the model's streams through the SDK's httpx2 client instead of aiohttp.

Which effects wait for an approval and for how long is the operator's floor: ``--require-approval EFFECT``
(repeatable; ``none`` for no effect) and ``--approval-timeout SECONDS``, else the config file's ``[serve]``
table, else every effect that changes something and 300 s. A session may tighten it, never lower it.
``--allow-host NAME`` (repeatable, or ``[serve] allow_hosts``) names the hosts requests may address the
server by beyond the loopback ones::

    [serve]
    allow_hosts = ["agents.example.com"]
    require_approval = ["mutate-irreversible", "destructive"]
    approval_timeout = 120
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from .. import ApprovalPolicy, EffectClass
from ..errors import InvalidInput
from ..spec import AgentSpec
from ..tools import EFFECT_CLASSES
from ..wire import configure_clients
from .config import Resolved
from .kit import APPROVAL_POLICY
from .tools import file_tools, shell_tool

__all__ = ["ServeFloor", "check_open_bind", "parse_tokens", "serve_command", "serve_floor"]

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


@dataclass(frozen=True, slots=True)
class ServeFloor:
    """What the operator holds every session to: the hosts it answers for and its approvals.

    Attributes:
        allowed_hosts: names beyond the loopback ones that requests may address the server by.
        approval_policy: the effects that wait for a decision, and for how long; a session may only
            tighten it.
    """

    allowed_hosts: tuple[str, ...] = ()
    approval_policy: ApprovalPolicy = APPROVAL_POLICY


def serve_floor(
    config: Mapping[str, Any],
    *,
    allow_hosts: Sequence[str] | None = None,
    require_approval: Sequence[str] | None = None,
    approval_timeout: float | None = None,
) -> ServeFloor:
    """The flags' values, else the config file's ``[serve]`` table's, else the defaults.

    Raises:
        InvalidInput: a ``[serve]`` value of the wrong type, an unknown effect, or ``none`` with others.
    """
    table = config.get("serve", {})
    if not isinstance(table, Mapping):
        raise InvalidInput("the config file's [serve] must be a table")
    unknown = sorted(set(table) - {"allow_hosts", "require_approval", "approval_timeout"})
    if unknown:
        raise InvalidInput(
            f"[serve] has no setting {unknown[0]!r} (allow_hosts, require_approval, approval_timeout)"
        )
    hosts = allow_hosts if allow_hosts is not None else _strings(table, "allow_hosts")
    effects = require_approval if require_approval is not None else _strings(table, "require_approval")
    timeout = approval_timeout if approval_timeout is not None else table.get("approval_timeout")
    policy = APPROVAL_POLICY
    if effects is not None:
        policy = replace(policy, require_for=frozenset(_effects(effects)))
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            raise InvalidInput(f"the approval timeout must be a number of seconds above 0, not {timeout!r}")
        policy = replace(policy, timeout_s=float(timeout))
    return ServeFloor(allowed_hosts=tuple(hosts or ()), approval_policy=policy)


def _strings(table: Mapping[str, Any], key: str) -> list[str] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"[serve] {key} must be a list of strings")
    return value


def _effects(given: Sequence[str]) -> list[EffectClass]:
    if "none" in given:
        if len(given) > 1:
            raise InvalidInput("--require-approval none cannot be given with effects")
        return []
    known = {effect: effect for effect in EFFECT_CLASSES}
    effects: list[EffectClass] = []
    for effect in given:
        if effect not in known:
            raise InvalidInput(f"{effect!r} is no effect class: {', '.join(EFFECT_CLASSES)}, or none")
        effects.append(known[effect])
    return effects


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
    floor: ServeFloor | None = None,
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
    floor = floor or ServeFloor()
    offered = [*file_tools(workdir)] if tools else []
    if tools and allow_shell:
        offered.append(shell_tool(workdir))
    settings = ServerSettings(
        endpoint=resolved.endpoint,
        model=resolved.model,
        store=store,
        node=node,  # none given: host:port, named after the bind (``server.serve``)
        tokens=dict(tokens),
        tools=offered,
        # ``resolved`` already went where the document's provider (or the flags) said.
        agent=None
        if spec is None
        else replace(spec, endpoint=replace(spec.endpoint, provider=None, failover=None)),
        context_length=resolved.context_length,
        limits=ServerLimits(max_runs_per_token=max_runs),
        durable=durable,
        allowed_hosts=floor.allowed_hosts,
        approval_policy=floor.approval_policy,
    )
    serve(settings, host=host, port=port)
    return 0
