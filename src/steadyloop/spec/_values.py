"""The values an agent document is read into: frozen, every field optional, ``None`` where the document is silent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, TypeAlias

from ..errors import InvalidInput

__all__ = [
    "EFFECT_CLASSES",
    "EFFORT_LEVELS",
    "FEATURES",
    "HOOK_EVENTS",
    "SPEC_VERSION",
    "AgentSpec",
    "ApprovalsSpec",
    "ContextSpec",
    "EndpointSpec",
    "HookSpec",
    "JsonValue",
    "LoopSpec",
    "MCPServer",
    "ModelSpec",
    "ParsedSpec",
    "PromptSection",
    "SpecError",
    "SpecProblem",
    "ToolsSpec",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

#: The token a document opens with: the format's name and its major version.
SPEC_VERSION = "steadyloop.agent/1"

#: What a document may list under ``requires`` and this library honours.
FEATURES: frozenset[str] = frozenset({"approvals", "bundle", "context", "hooks", "mcp", "ondemand-tools"})

#: Reasoning efforts a document may ask for (the effort ladder, and ``off``).
EFFORT_LEVELS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "off")

#: Effect classes a tool may declare, as ``steadyloop.tools.definition`` spells them.
EFFECT_CLASSES: tuple[str, ...] = ("read", "mutate-reversible", "mutate-irreversible", "destructive")

#: Lifecycle events a hook may run at, as ``steadyloop.hooks`` spells them.
HOOK_EVENTS: tuple[str, ...] = (
    "session_start",
    "before_turn",
    "after_turn",
    "before_compact",
    "session_end",
    "session_delete",
)

_EMPTY: Mapping[str, JsonValue] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SpecProblem:
    """One thing wrong with a document: where it is, and what.

    Attributes:
        path: keys and list positions from the document's root to the value (``()`` is the document).
        message: what is wrong, and for a warning, what was done about it.
    """

    path: tuple[str | int, ...]
    message: str

    @property
    def where(self) -> str:
        """The path as text: ``model.temperature``, ``prompt[1].text``, ``(document)`` for the root."""
        out = ""
        for part in self.path:
            if isinstance(part, int):
                out += f"[{part}]"
            elif part.isidentifier():
                out += f".{part}" if out else part
            else:
                quoted = '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'
                out += f".{quoted}" if out else quoted
        return out or "(document)"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class SpecError(InvalidInput):
    """An agent document was refused; every reason is in ``problems``, each with its path.

    Only the document itself is refused: it is not an object, its ``spec`` token is missing or of another
    major version, it ``requires`` something this host does not do, or a table or list is of the wrong kind.

    Attributes:
        problems: the reasons, in document order.
        warnings: what would have been dropped had the document been accepted.
    """

    def __init__(self, problems: tuple[SpecProblem, ...], warnings: tuple[SpecProblem, ...] = ()) -> None:
        shown = "; ".join(str(p) for p in problems[:10])
        more = f"; and {len(problems) - 10} more" if len(problems) > 10 else ""
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"agent document refused ({len(problems)} {noun}): {shown}{more}")
        self.problems = problems
        self.warnings = warnings


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointSpec:
    """Where the agent's model is served. Never a key: the host decides which key an endpoint gets.

    Attributes:
        base_url: an OpenAI-compatible base URL.
        provider: a provider preset (``steadyloop.PROVIDERS``: ``anthropic``, ``gemini``, ``ollama``, ...),
            at its own URL or ``<NAME>_BASE_URL``, with ``<NAME>_API_KEY``; the model is ``model.name``.
        failover: the candidates to hand over to, in order, when the first fails before its first event:
            ``"provider"`` or ``"provider:model"`` each (a candidate without a model runs the run's).
        context_length: the window, where the endpoint does not say.
        request_timeout: seconds of silence allowed mid-stream; ``0`` waits forever.
        first_token_timeout: seconds allowed before the first chunk that carries something.
    """

    base_url: str | None = None
    provider: str | None = None
    failover: tuple[str, ...] | None = None
    context_length: int | None = None
    request_timeout: float | None = None
    first_token_timeout: float | None = None

    def chain(self, model: str | None = None) -> str | None:
        """The ``steadyloop.failover`` chain the provider and its failover name (``None`` without a
        provider): ``"anthropic:claude-sonnet-4-5,gemini:gemini-2.5-flash"``."""
        if self.provider is None:
            return None
        first = f"{self.provider}:{model}" if model else self.provider
        return ",".join((first, *(self.failover or ())))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """The model and what to ask of it (``ModelParams`` in a document).

    Attributes:
        name: the model as the endpoint knows it.
        temperature: 0 to 2.
        max_tokens: the reply ceiling, at least 1.
        reasoning_effort: ``none`` .. ``high``, or ``off``.
        tool_choice: ``auto``, ``required`` or ``none``.
        reasoning_replay: send the reasoning behind a tool call back with it.
        extra_body: anything else the server takes (``top_k``, ``min_p`` ...); merged by key across layers.
    """

    name: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None
    reasoning_replay: bool | None = None
    extra_body: Mapping[str, JsonValue] | None = None


@dataclass(frozen=True, slots=True)
class PromptSection:
    """One section of the system prompt; sections with the same id replace each other across layers."""

    id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsSpec:
    """Which tools the agent gets and how its calls run.

    ``names`` and ``servers`` are three-way: absent is everything the host offers, an empty list is
    nothing, a list is exactly those. A later layer replaces them whole.

    Attributes:
        names: the host's tools, by name.
        servers: MCP servers, by name: the host's, and the document's own bundled ones where allowed.
        discovery: ``all`` declares every tool; ``ondemand`` declares a catalogue and ``load_tools``.
        parallel: run calls whose resources do not conflict at the same time.
        max_concurrency: the most calls at once in a parallel batch; ``0`` for no cap.
        timeout: seconds any call may take when its tool does not say.
        recover_calls: read calls a model wrote as text.
    """

    names: tuple[str, ...] | None = None
    servers: tuple[str, ...] | None = None
    discovery: Literal["all", "ondemand"] | None = None
    parallel: bool | None = None
    max_concurrency: int | None = None
    timeout: float | None = None
    recover_calls: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalsSpec:
    """Which calls wait for a person's decision.

    Attributes:
        require_for: effect classes that are gated (replaced whole by a later layer).
        overrides: per tool name, ``True`` to always gate, ``False`` to never (merged by name).
        timeout: seconds a decision may take before the call is denied.
    """

    require_for: tuple[str, ...] | None = None
    overrides: Mapping[str, bool] | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSpec:
    """How a run keeps inside its window.

    Attributes:
        enabled: prune and fold when the window fills.
        keep_last: tool results kept whole when pruning.
        max_chars: a tool result longer than this is pruned.
    """

    enabled: bool | None = None
    keep_last: int | None = None
    max_chars: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSpec:
    """Bounds on one run.

    Attributes:
        max_tool_iterations: steps that may end in tool calls.
        max_continuations: extra requests to carry on an answer cut at the token ceiling.
        max_turns: requests one prompt may make.
        run_timeout: seconds a run may take.
    """

    max_tool_iterations: int | None = None
    max_continuations: int | None = None
    max_turns: int | None = None
    run_timeout: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HookSpec:
    """A lifecycle hook: at ``event``, call the read-only tool ``tool``; its text becomes context.

    Attributes:
        id: the hook's id; the same id in a later layer replaces it.
        event: one of ``HOOK_EVENTS``.
        tool: the tool to call.
        arguments: what to call it with.
        max_tokens: this hook's own cap on its text.
    """

    id: str
    event: str
    tool: str
    arguments: Mapping[str, JsonValue] = field(default_factory=lambda: _EMPTY)
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServer:
    """An MCP server the document brings along: a command line (stdio) or a URL (streamable HTTP).

    Attributes:
        name: its label; ``tools.servers`` names it.
        command: the executable of a stdio server.
        args: its arguments.
        env: environment variables for it, as literals (``${VAR}`` is not expanded).
        cwd: its working directory.
        url: the endpoint of a streamable HTTP server.
        headers: HTTP headers for it, as literals.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """An agent as a document says it, or as layers of documents resolve to.

    Every field may be absent (``None``, or a sub-spec whose fields are all ``None``); an absent field
    inherits from the layer below. Nothing else inherits: ``0``, ``""`` and ``[]`` mean what they say.

    Attributes:
        requires: features the document needs the host to honour (``FEATURES``).
        name: a short name.
        description: what the agent is for.
        endpoint: where its model is served.
        model: the model and its parameters.
        prompt: the system prompt's sections, merged by id.
        tools: which tools, and how calls run.
        approvals: which calls wait for a decision.
        context: keeping inside the window.
        loop: bounds on a run.
        hooks: lifecycle hooks, merged by id.
        bundle: MCP servers the document brings (read only when the host allows bundles), merged by name.
    """

    requires: tuple[str, ...] = ()
    name: str | None = None
    description: str | None = None
    endpoint: EndpointSpec = field(default_factory=EndpointSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    prompt: tuple[PromptSection, ...] | None = None
    tools: ToolsSpec = field(default_factory=ToolsSpec)
    approvals: ApprovalsSpec = field(default_factory=ApprovalsSpec)
    context: ContextSpec = field(default_factory=ContextSpec)
    loop: LoopSpec = field(default_factory=LoopSpec)
    hooks: tuple[HookSpec, ...] | None = None
    bundle: tuple[MCPServer, ...] | None = None

    @property
    def system_prompt(self) -> str | None:
        """The prompt's sections joined by a blank line (empty ones left out); ``None`` when absent."""
        if self.prompt is None:
            return None
        return "\n\n".join(section.text for section in self.prompt if section.text)


@dataclass(frozen=True, slots=True)
class ParsedSpec:
    """What ``parse_spec`` read.

    Attributes:
        spec: the document's values.
        warnings: what was dropped, and why, each with its path.
    """

    spec: AgentSpec
    warnings: tuple[SpecProblem, ...] = ()
