"""What a server is made of: its endpoint, its store, who may call it, what it offers, and its limits.

Auth is bearer tokens, each naming the principal whose sessions it opens (a token sees only its own).
With no token at all the server answers loopback clients only (a request a proxy forwarded is not one),
and ``check_bind`` refuses to listen anywhere else: an open agent with tools on a network address is not
something to start by accident. With or without tokens, a request must name a loopback host or one in
``allowed_hosts`` (``server/guard.py``).
"""

from __future__ import annotations

import ipaddress
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from steadyloop import ApprovalPolicy, Endpoint, InvalidInput, Tool, failover, provider, provider_from_env
from steadyloop.sessions import check_id
from steadyloop.spec import AgentSpec, MCPServer
from steadyloop.wire import Target

from .guard import allowed_host_entry, forwarded_by

__all__ = ["LOCAL_PRINCIPAL", "ServerLimits", "ServerSettings", "check_bind", "is_local", "is_loopback"]

#: The principal every request acts as when the server has no tokens (loopback only).
LOCAL_PRINCIPAL = "local"

_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What one request or one token may ask for.

    Attributes:
        max_body_bytes: a request body's size.
        max_images: images on one message.
        max_image_bytes: one image, decoded.
        max_schema_bytes: an output schema, serialized.
        max_runs_per_token: runs one token may have going at once.
        approval_timeout_s: deprecated: the floor's ``ServerSettings.approval_policy.timeout_s`` says how
            long a gated call waits. Set here, it is taken as that timeout (with a DeprecationWarning)
            where the approval policy leaves its own at the default.
    """

    max_body_bytes: int = 25 * _MB
    max_images: int = 4
    max_image_bytes: int = 5 * _MB
    max_schema_bytes: int = 32 * 1024
    max_runs_per_token: int = 16
    approval_timeout_s: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_images",
            "max_image_bytes",
            "max_schema_bytes",
            "max_runs_per_token",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise InvalidInput(f"ServerLimits.{name} must be a whole number >= 0, got {value!r}")
        if self.approval_timeout_s is not None and not self.approval_timeout_s > 0:
            raise InvalidInput(
                f"ServerLimits.approval_timeout_s must be > 0, got {self.approval_timeout_s!r}"
            )


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Everything ``create_app`` needs.

    A server whose own agent document names a provider (``endpoint.provider`` and ``endpoint.failover``)
    is made with ``from_agent``, which builds that endpoint as the library does; handed to the constructor
    with another endpoint, such a document is refused rather than quietly overruled.

    Attributes:
        endpoint: where every session's requests go (a session cannot point the server elsewhere).
        model: the model sessions use unless they name one; ``None`` asks the endpoint at start-up.
        store_path: the SQLite session store; ``None`` for the default place.
        store: the session store as ``open_store`` reads it (``postgresql://...`` for one several servers
            share, or a SQLite path); takes precedence over ``store_path``.
        node: this server's name among those sharing a store: at start-up it closes, as interrupted, the
            runs it left going, never another node's. ``None``: the machine's host name.
        tokens: bearer token -> principal (``[A-Za-z0-9_-]{1,64}``); empty serves loopback only.
        tools: the tools sessions may pick by name.
        mcp_servers: MCP servers sessions may pick by name (connected per session, closed with it).
        agent: the server's own layer under every session's agent settings.
        approval_policy: which calls wait for a decision, and for how long: the floor of every session
            (with the approvals of ``agent``, if it has any). A session may gate more effects or tools and
            wait less, never gate less or wait longer.
        context_length: the endpoint's window, where it does not say.
        limits: request and run limits.
        page: serve the web page at ``/``.
        durable: each run is a DBOS workflow that another node (or this one, restarted) resumes if this
            node dies mid-run; needs a PostgreSQL ``store`` and the ``durable`` extra.
        allowed_hosts: host names (or addresses) requests may name in ``Host`` beyond the loopback ones,
            e.g. the name a reverse proxy or the network reaches the server by; ``"*"`` takes any (turns
            the DNS-rebinding check off). Written without scheme or port.
    """

    endpoint: Endpoint
    model: str | None = None
    store_path: Path | None = None
    store: str | None = None
    node: str | None = None
    tokens: Mapping[str, str] = field(default_factory=dict)
    tools: Sequence[Tool] = ()
    mcp_servers: Sequence[MCPServer] = ()
    agent: AgentSpec | None = None
    approval_policy: ApprovalPolicy = field(
        default_factory=lambda: ApprovalPolicy(
            require_for=frozenset({"mutate-reversible", "mutate-irreversible", "destructive"})
        )
    )
    context_length: int | None = None
    limits: ServerLimits = field(default_factory=ServerLimits)
    page: bool = True
    durable: bool = False
    allowed_hosts: Sequence[str] = ()

    def __post_init__(self) -> None:
        if isinstance(self.allowed_hosts, str):
            raise InvalidInput("ServerSettings.allowed_hosts is a list of host names, not one string")
        object.__setattr__(self, "allowed_hosts", tuple(allowed_host_entry(h) for h in self.allowed_hosts))
        if self.agent is not None and (self.agent.endpoint.provider or self.agent.endpoint.failover):
            raise InvalidInput(
                "the server's agent document names its provider: make the settings with "
                "ServerSettings.from_agent, which builds that endpoint, instead of passing another one"
            )
        self._fold_limits_timeout()
        for token, principal in self.tokens.items():
            if not isinstance(token, str) or len(token) < 8:
                raise InvalidInput("each bearer token must be a string of at least 8 characters")
            check_id(principal, "a token's principal")

    def _fold_limits_timeout(self) -> None:
        """The deprecated ``ServerLimits.approval_timeout_s``, which once did nothing, taken as the floor's."""
        timeout = self.limits.approval_timeout_s
        if timeout is None:
            return
        warnings.warn(
            "ServerLimits.approval_timeout_s is deprecated: set "
            "ServerSettings(approval_policy=ApprovalPolicy(..., timeout_s=...)) instead",
            DeprecationWarning,
            stacklevel=4,
        )
        policy = self.approval_policy
        if policy.timeout_s == ApprovalPolicy().timeout_s:
            object.__setattr__(self, "approval_policy", replace(policy, timeout_s=timeout))
        elif policy.timeout_s != timeout:
            raise InvalidInput(
                f"ServerLimits.approval_timeout_s ({timeout:g} s) and approval_policy.timeout_s "
                f"({policy.timeout_s:g} s) disagree: set only approval_policy.timeout_s"
            )

    @classmethod
    def from_agent(
        cls,
        agent: AgentSpec | None = None,
        *,
        env: Mapping[str, str] | None = None,
        model: str | None = None,
        **fields: Any,
    ) -> ServerSettings:
        """Settings whose endpoint is the one the agent document (else the environment) names.

        The document's ``endpoint.provider`` with its ``failover`` is a chain made by
        ``steadyloop.failover`` (preset URLs, ``<NAME>_BASE_URL`` and ``<NAME>_API_KEY``, the native
        Anthropic and Gemini wires), at ``endpoint.base_url`` when the document names one, with its
        timeouts. A document without a provider leaves the choice to ``steadyloop.provider_from_env``
        (``STEADYLOOP_FAILOVER``, ``STEADYLOOP_PROVIDER``, ``STEADYLOOP_MODEL``).

        Args:
            agent: the server's own layer under every session's agent settings.
            env: the environment the providers' URLs and keys are read from (default ``os.environ``).
            model: the model sessions use unless they name one (default: the document's, else the
                chain's first, else the environment's).
            **fields: the other ``ServerSettings`` fields.

        Raises:
            UnknownProvider: the document or the environment names no known provider.
            InvalidInput: a field is refused, or the document names a URL without a provider.
        """
        target = _target_of(agent, env)
        model = model or (agent.model.name if agent is not None else None) or target.model
        if agent is not None:
            routed = replace(agent.endpoint, provider=None, failover=None, base_url=None)
            agent = replace(agent, endpoint=routed)
        return cls(endpoint=target.endpoint, model=model, agent=agent, **fields)

    @property
    def principals(self) -> list[str]:
        """Every principal a request may act as."""
        return sorted(set(self.tokens.values())) if self.tokens else [LOCAL_PRINCIPAL]


def _target_of(agent: AgentSpec | None, env: Mapping[str, str] | None) -> Target:
    routing = agent.endpoint if agent is not None else None
    if routing is None or routing.provider is None:
        if routing is not None and routing.base_url is not None:
            raise InvalidInput(
                "the server's agent document names a base_url without a provider: pass the endpoint "
                "to ServerSettings, or name the provider the URL serves"
            )
        return provider_from_env(env)
    model = agent.model.name if agent is not None else None
    first = provider(routing.provider, base_url=routing.base_url, env=env)
    timeouts = {
        name: value
        for name in ("request_timeout", "first_token_timeout")
        if (value := getattr(routing, name)) is not None
    }
    if timeouts:
        first = replace(first, **timeouts)
    rest = [
        (name.strip(), chosen.strip() or None)
        for name, _, chosen in (candidate.partition(":") for candidate in routing.failover or ())
    ]
    return failover([Target(first, model), *rest], env=env)


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_local(peer: str | None, headers: Iterable[tuple[str, str]]) -> bool:
    """Whether a request comes from this machine's own user: its peer is loopback and no header says a
    proxy forwarded it (a local reverse proxy's peer is loopback whoever its client is)."""
    return is_loopback(peer) and forwarded_by(headers) is None


def check_bind(host: str, settings: ServerSettings) -> None:
    """Refuse to listen beyond loopback without a token.

    Raises:
        InvalidInput: ``host`` is not loopback and ``settings.tokens`` is empty.
    """
    if not settings.tokens and not is_loopback(host):
        raise InvalidInput(
            f"refusing to listen on {host} without a bearer token: set STEADYLOOP_SERVER_TOKENS "
            "(or --token) to serve beyond this machine, or listen on 127.0.0.1"
        )
