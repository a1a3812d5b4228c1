"""Defining tools: the ``Tool`` value, what a call sees (``ToolContext``), what it returns (``ToolResult``),
and ``@tool`` for typed Python functions.

``@tool`` takes the name from the function, the description from its docstring, and the parameters schema
and argument validation from pydantic; validation errors go back to the model as a tool error it can read.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import InvalidInput
from ..messages import ContentPart, ImagePart, TextPart
from ..sizing.tokens import CHARS_PER_TOKEN

__all__ = [
    "EFFECT_CLASSES",
    "EffectClass",
    "ResourceClaim",
    "Tool",
    "ToolContext",
    "ToolResult",
    "tool",
]

EffectClass: TypeAlias = Literal["read", "mutate-reversible", "mutate-irreversible", "destructive"]
EFFECT_CLASSES: tuple[EffectClass, ...] = ("read", "mutate-reversible", "mutate-irreversible", "destructive")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """Something a call touches, for the scheduler: reads of one key share it, a write is exclusive."""

    key: str
    access: Literal["read", "write"] = "read"


ClaimsFn: TypeAlias = Callable[[Mapping[str, Any]], "Sequence[ResourceClaim] | Literal['exclusive']"]


@dataclass(slots=True)
class ToolContext:
    """What one call can see and do besides its arguments.

    Attributes:
        call_id: the id the result answers.
        name: the tool's name.
        raw_arguments: the arguments as the model wrote them, when it wrote text.
        cancelled: set when the run is aborted or the call timed out; long work should stop (a sync tool
            may poll ``cancelled.is_set()`` from its thread).
        progress: report streamed progress (becomes a ``ToolExecutionUpdate`` event).
        worker: for a sync tool, the result of its worker thread, set when it starts; it outlives a
            timeout or an abort (a thread cannot be stopped from outside), and its late result is reported.
        budget_tokens: the tokens the context window has left for this call's result, ``None`` when the
            run knows no window. The loop works it out from the window, what the next request already
            holds and the room kept for the reply, shared evenly by the step's calls
            (``steadyloop.context.room``). A tool that can answer in less (fewer lines, the first
            matches) should, and say how to get the rest; a result that does not fit is cut by the
            context keeper, head and tail kept, where the run keeps its context.
        chars_per_token: the ratio measured for the model (four before the first measurement), to turn
            ``budget_tokens`` into characters; ``budget_chars`` does.
    """

    call_id: str
    name: str
    raw_arguments: str | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    progress: Callable[[str], object] = lambda _text: None
    worker: asyncio.Future[Any] | None = field(default=None, repr=False)
    budget_tokens: int | None = None
    chars_per_token: float = CHARS_PER_TOKEN

    @property
    def budget_chars(self) -> int | None:
        """``budget_tokens`` in characters at ``chars_per_token``; ``None`` when there is no budget."""
        if self.budget_tokens is None:
            return None
        return max(int(self.budget_tokens * self.chars_per_token), 0)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns.

    Attributes:
        content: text, or parts (text and images) for the model.
        details: structured data for the host (never sent to the model).
        is_error: the model should read this as a failure.
        terminate: ask the loop to stop after this batch (only when every result in the batch asks).
    """

    content: str | tuple[ContentPart, ...]
    details: Mapping[str, Any] = field(default_factory=dict)
    is_error: bool = False
    terminate: bool = False

    @classmethod
    def of(cls, value: object) -> ToolResult:
        """Whatever a tool function returned, as a result: text as is, parts as parts, anything else as JSON."""
        if isinstance(value, ToolResult):
            return value
        if value is None:
            return cls("")
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, TextPart | ImagePart):
            return cls((value,))
        if (
            isinstance(value, list | tuple)
            and value
            and all(isinstance(v, TextPart | ImagePart) for v in value)
        ):
            return cls(tuple(value))
        if isinstance(value, BaseModel):
            return cls(value.model_dump_json())
        try:
            return cls(json.dumps(value, ensure_ascii=False, default=str))
        except (TypeError, ValueError):
            return cls(str(value))


Execute: TypeAlias = Callable[[dict[str, Any], ToolContext], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model may call.

    Attributes:
        name: what the model calls it (letters, digits, ``_`` and ``-``, at most 64).
        description: what it does, for the model.
        parameters: its arguments as a JSON Schema object.
        execute: ``async (arguments, context) -> result``; a result may be a ``ToolResult``, text, parts, or
            anything JSON-serialisable. Raising is how a tool fails: the error's text is what the model reads.
        effect: what it does to the world, for approvals and scheduling; ``None`` when nobody said.
        claims: resources a call touches (a list, or a function of the arguments); ``"exclusive"`` runs it
            alone. A tool with no claims runs alone in a parallel batch.
        timeout: seconds a call may take; ``None`` defers to the run's per-name and fallback timeouts.
        sequential: any batch containing this tool runs one call at a time.
        dedupe: identical calls in one step may share one answer (``False`` for tools where twice is twice).
        idempotent: running a call twice does what running it once does. A durable run that lost a call
            in flight (its node died) runs it again only if this is set or the effect is ``read``; any other
            call is closed with an "interrupted" result the model reads.
        label: the server or group it comes from, for catalogues.
        strict: declare the tool for strict schema adherence (OpenAI's ``strict: true``): the definition
            then says so and closes every object schema (``additionalProperties: false``), as strict mode
            requires. Off by default, when nothing closed is sent: grammar servers already keep arguments to
            the declared properties, and the marker costs prompt tokens on every request.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    execute: Execute
    effect: EffectClass | None = None
    claims: Sequence[ResourceClaim] | Literal["exclusive"] | ClaimsFn | None = None
    timeout: float | None = None
    sequential: bool = False
    dedupe: bool = True
    idempotent: bool = False
    label: str | None = None
    strict: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise InvalidInput(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if self.effect is not None and self.effect not in EFFECT_CLASSES:
            raise InvalidInput(
                f"tool {self.name}: effect must be one of {EFFECT_CLASSES}, not {self.effect!r}"
            )
        if not isinstance(self.parameters, Mapping):
            raise InvalidInput(f"tool {self.name}: parameters must be a JSON Schema object")

    def definition(self) -> dict[str, Any]:
        """The OpenAI-format definition the request declares."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }
        if self.strict:
            function["parameters"] = _closed(function["parameters"])
            function["strict"] = True
        return {"type": "function", "function": function}

    def claims_for(
        self, arguments: Mapping[str, Any]
    ) -> Sequence[ResourceClaim] | Literal["exclusive"] | None:
        """The claims of one call."""
        claims = self.claims
        if callable(claims):
            return claims(arguments)
        return claims


def _closed(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to others (strict mode's rule)."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: _closed(value) for key, value in schema.items()}
    if isinstance(out.get("properties"), Mapping):
        out["additionalProperties"] = False
    return out


# -- @tool -------------------------------------------------------------------------------------------


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (text before any section) and per-argument descriptions from a Google docstring."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    lines = text.splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section = ""
    current = ""
    for line in lines:
        stripped = line.strip()
        if re.match(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$", stripped):
            section = stripped[:-1].lower()
            continue
        if section in ("args", "arguments", "parameters"):
            m = re.match(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", stripped)
            if m and line.startswith((" ", "\t")) and not line.startswith(("        ", "\t\t")):
                current = m.group(1)
                args[current] = m.group(2)
            elif current and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
        elif not section:
            description.append(line)
    return "\n".join(description).strip(), args


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _validation_message(name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        problems.append(f"{where}: {item.get('msg', 'invalid')}")
    return (
        f"Invalid arguments for {name}: " + "; ".join(problems) + ". Call it again with corrected arguments."
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect: EffectClass | None = None,
    claims: Sequence[ResourceClaim] | Literal["exclusive"] | ClaimsFn | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    dedupe: bool = True,
    idempotent: bool = False,
    strict: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: EffectClass | None = None,
    claims: Sequence[ResourceClaim] | Literal["exclusive"] | ClaimsFn | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    dedupe: bool = True,
    idempotent: bool = False,
    strict: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a typed Python function (sync or async) a ``Tool``.

    The parameters schema and argument validation come from the type hints (pydantic); the description
    from the docstring, with per-argument descriptions from its ``Args:`` section. A parameter annotated
    ``ToolContext`` receives the call's context and is not shown to the model. A sync function runs in a
    worker thread so it does not block the loop; a timeout or an abort closes its call at once but cannot
    stop the thread, which runs to its end and is reported then (``LateSettlement``). Arguments the
    function does not take are refused when called; the schema does not say so unless ``strict`` (see
    ``Tool.strict``).

    Example::

        @steadyloop.tool
        def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
            \"\"\"Current weather for a city.

            Args:
                city: the city name.
            \"\"\"
    """

    def build(func: Callable[..., Any]) -> Tool:
        signature = inspect.signature(func)
        hints = get_type_hints(func, include_extras=True)
        summary, arg_docs = _docstring_parts(func.__doc__)
        fields: dict[str, Any] = {}
        context_param: str | None = None
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise InvalidInput(f"tool {func.__name__}: *args and **kwargs cannot be described to a model")
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext:
                context_param = param.name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
        model: type[BaseModel] = create_model(f"{func.__name__}_arguments", __base__=_Arguments, **fields)
        schema = model.model_json_schema()
        schema.pop("title", None)
        # Validation refuses unknown arguments either way; saying so in the schema is for strict endpoints.
        schema.pop("additionalProperties", None)
        for prop in schema.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        schema.setdefault("properties", {})
        is_async = inspect.iscoroutinefunction(func)
        tool_name = name or func.__name__

        async def execute(arguments: dict[str, Any], context: ToolContext) -> object:
            try:
                validated = model.model_validate(arguments)
            except ValidationError as exc:
                return ToolResult(_validation_message(tool_name, exc), is_error=True)
            kwargs = {key: getattr(validated, key) for key in fields}
            if context_param is not None:
                kwargs[context_param] = context
            if is_async:
                return await func(**kwargs)
            # Shielded: cancelling the call cannot stop the thread, and the thread's outcome is still wanted
            # (the call's closer reports it as a late settlement).
            run = functools.partial(contextvars.copy_context().run, func, **kwargs)
            worker = asyncio.get_running_loop().run_in_executor(None, run)
            context.worker = worker
            return await asyncio.shield(worker)

        return Tool(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=schema,
            execute=execute,
            effect=effect,
            claims=claims,
            timeout=timeout,
            sequential=sequential,
            dedupe=dedupe,
            idempotent=idempotent,
            strict=strict,
        )

    if fn is not None:
        return build(fn)
    return build
