"""On-demand tools: a name-only catalogue, a ``load_tools`` meta-tool, and choosing tools up front.

Declaring every tool a run might reach costs their schemas on every request, thousands of tokens with a few
MCP servers connected. In on-demand mode a request declares only ``load_tools`` and the tools loaded so far,
and the system prompt carries a catalogue: one line per tool, its name, server label and what it does.

The catalogue text is the same on every step. It never marks what has been loaded, because it sits at the
head of the prompt and rewriting it would lose the server's prompt cache for the whole transcript; the
``load_tools`` result tells a model that asks twice that it already has a tool instead.

A preselection (from ``preselect``, or the host's own) shapes the first step only: those tools, no catalogue
and no ``load_tools``, because a model with the whole menu in front of it goes shopping. From the second step
on everything is back.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from ..events import Event, Notice
from ..turn.side_tasks import ask_json
from ..wire.endpoints import Endpoint
from ._keywords import KeywordSelection, preselect_by_keywords
from .definition import Tool, ToolContext, ToolResult

__all__ = [
    "LOAD_TOOLS",
    "MAX_CARRIED",
    "MAX_PER_LOAD",
    "PRESELECT_SCHEMA",
    "CatalogEntry",
    "KeywordSelection",
    "ToolLoader",
    "catalog_of",
    "catalogue_text",
    "preselect",
    "preselect_by_keywords",
]

#: The meta-tool's name.
LOAD_TOOLS = "load_tools"

#: Tools one ``load_tools`` call may load. A task rarely needs more than a handful at once, and a model that
#: asks for twenty is loading the catalogue rather than choosing from it.
MAX_PER_LOAD = 8

#: Loaded tools carried into the next turn of a conversation. It bounds the tool array a long conversation
#: would otherwise grow without end, while keeping what the last few turns used.
MAX_CARRIED = 16


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One tool as the catalogue shows it.

    Attributes:
        name: the tool's name.
        label: the server or group it comes from, when it has one.
        description: one line saying what it does.
    """

    name: str
    label: str | None
    description: str


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def catalog_of(tools: Sequence[Tool]) -> list[CatalogEntry]:
    """The catalogue of some tools: name, label, and the first line of each description."""
    return [CatalogEntry(tool.name, tool.label, _first_line(tool.description)) for tool in tools]


def catalogue_text(catalog: Sequence[CatalogEntry], max_per_load: int = MAX_PER_LOAD) -> str:
    """The catalogue as the system prompt carries it, grouped by label and ordered by name.

    Ordered, so the same tools give the same text whatever order their servers connected in.
    """
    lines = [
        f"Tools you can load: call {LOAD_TOOLS} with the names you need (up to {max_per_load} per call) "
        "before you use them.",
    ]
    groups: dict[str, list[CatalogEntry]] = {}
    for entry in catalog:
        groups.setdefault(entry.label or "", []).append(entry)
    for label in sorted(groups):
        if label:
            lines.append(f"{label}:")
        for entry in sorted(groups[label], key=lambda item: item.name):
            lines.append(f"- {entry.name}: {entry.description}" if entry.description else f"- {entry.name}")
    return "\n".join(lines)


_LOAD_TOOLS_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "names": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Names of catalogue tools to load.",
        }
    },
    "required": ["names"],
}


def _requested_names(arguments: Mapping[str, Any]) -> list[str]:
    """The names a ``load_tools`` call asked for, read leniently, in order and without repeats."""
    raw = arguments.get("names", arguments.get("tools", arguments.get("name")))
    if isinstance(raw, str):
        # Small models write one name, or a comma-separated list, where an array was asked for.
        items: list[object] = list(re.split(r"[,\s]+", raw))
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        items = []
    names: list[str] = []
    for item in items:
        name = item.get("name") if isinstance(item, Mapping) else item
        if isinstance(name, str) and name.strip() and name.strip() not in names:
            names.append(name.strip())
    return names


class ToolLoader:
    """One run's view of which tools each request declares, and the ``load_tools`` meta-tool.

    Args:
        tools: every tool the run may reach.
        catalog: the name-only catalogue; by default, every tool. Tools left out of it are always declared.
        ondemand: declare ``load_tools`` and loaded tools, and carry the catalogue on the system prompt;
            otherwise every tool is declared on every step.
        preselected: tools chosen up front; the first step declares only these. Unknown names are dropped,
            and an empty choice means no preselection.
        carried: tools loaded in an earlier turn of the conversation, loaded from the start.
        max_per_load: tools one ``load_tools`` call may load.
        max_carried: tools ``carry_over`` keeps.

    Raises:
        InvalidInput: two tools share a name, a tool is called ``load_tools``, or the catalogue names a tool
            that is not among ``tools``.
    """

    def __init__(
        self,
        tools: Sequence[Tool],
        catalog: Sequence[CatalogEntry] | None = None,
        *,
        ondemand: bool = False,
        preselected: Sequence[str] | None = None,
        carried: Sequence[str] = (),
        max_per_load: int = MAX_PER_LOAD,
        max_carried: int = MAX_CARRIED,
    ) -> None:
        if max_per_load < 1 or max_carried < 0:
            raise InvalidInput("max_per_load must be at least 1 and max_carried at least 0")
        self.ondemand = ondemand
        self.max_per_load = max_per_load
        self.max_carried = max_carried
        self._given_catalog = list(catalog) if catalog is not None else None
        self._meta: Tool | None = None
        self._index(tools, self._given_catalog if self._given_catalog is not None else catalog_of(tools))
        chosen = [name for name in dict.fromkeys(preselected or ()) if name in self._tools]
        self._preselected = chosen or None
        self._loaded: list[str] = []
        # Recency of use, for carry_over: a tool the model keeps calling outlives one it loaded and forgot.
        self._used: dict[str, int] = {}
        self._tick = 0
        self.tools_loaded = 0
        self.redundant_loads = 0
        self._unknown: list[str] = []
        if ondemand:
            for name in carried:
                if name in self._catalogued and name not in self._used:
                    self._load(name)

    def retool(self, tools: Sequence[Tool]) -> None:
        """Take the tools now in force in place of the ones given (the host changed them mid-run).

        A tool no longer given is gone: not declared, not resolved, not loaded. A loaded tool still given
        stays loaded; the catalogue is the one given, less the tools that are gone, or else built anew.

        Raises:
            InvalidInput: as the constructor does.
        """
        given = self._given_catalog
        names = {tool.name for tool in tools}
        self._index(tools, [e for e in given if e.name in names] if given is not None else catalog_of(tools))
        self._loaded = [name for name in self._loaded if name in self._catalogued]
        self._used = {name: tick for name, tick in self._used.items() if name in self._catalogued}
        if self._preselected is not None:
            self._preselected = [name for name in self._preselected if name in self._tools] or None

    def _index(self, tools: Sequence[Tool], catalog: list[CatalogEntry]) -> None:
        """Index the tools and their catalogue, and what that decides: pinned tools, the meta-tool, the
        catalogue text."""
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in by_name:
                raise InvalidInput(f"two tools are named {tool.name!r}")
            if tool.name == LOAD_TOOLS:
                raise InvalidInput(f"{LOAD_TOOLS!r} is the on-demand meta-tool's name; rename that tool")
            by_name[tool.name] = tool
        missing = [entry.name for entry in catalog if entry.name not in by_name]
        if missing:
            raise InvalidInput(
                f"the catalogue names tools that are not among the tools: {', '.join(missing)}"
            )
        self._tools = by_name
        self._catalog = catalog
        self._catalogued = {entry.name for entry in catalog}
        self._pinned = [tool for tool in tools if tool.name not in self._catalogued] if self.ondemand else []
        if self.ondemand and catalog:
            self._meta = self._meta or self._load_tools_tool()
        else:
            self._meta = None
        self._suffix = "\n\n" + catalogue_text(catalog, self.max_per_load) if self._meta else ""

    def names(self) -> list[str]:
        """Every name a call may reach: the tools, and ``load_tools`` on demand."""
        return [*self._tools, *([LOAD_TOOLS] if self._meta is not None else [])]

    # -- what each step declares

    def declared(self, step: int) -> list[Tool]:
        """The tools step ``step`` (counted from 1) declares; the caller puts them in its own order."""
        if self._preselected is not None and step <= 1:
            chosen = [self._tools[name] for name in self._preselected]
            return chosen + [tool for tool in self._pinned if tool.name not in self._preselected]
        if not self.ondemand:
            return list(self._tools.values())
        meta = [self._meta] if self._meta is not None else []
        return meta + self._pinned + [self._tools[name] for name in self._loaded]

    def system_suffix(self, step: int) -> str:
        """Text to append to the system prompt on step ``step``: the catalogue, or ``""``.

        The same text on every step of an on-demand run whatever has been loaded, and ``""`` on a
        preselected first step and when not on demand.
        """
        if self._preselected is not None and step <= 1:
            return ""
        return self._suffix

    def resolve(self, name: str) -> Tool | None:
        """The tool to run for a call named ``name``, or ``None`` when there is none.

        A catalogued tool the model calls without loading it is loaded on the spot: the model is right
        about what it wants, and refusing would cost a step to load it and another to call it again.
        """
        if self._meta is not None and name == LOAD_TOOLS:
            return self._meta
        tool = self._tools.get(name)
        if tool is None:
            self._note_unknown(name)
            return None
        if self.ondemand and name in self._catalogued:
            if name in self._used:
                self._touch(name)
            else:
                self._load(name)
                self.tools_loaded += 1
        return tool

    # -- state

    @property
    def loaded(self) -> list[str]:
        """Loaded tools, in the order they were loaded."""
        return list(self._loaded)

    @property
    def unknown_tool_names(self) -> list[str]:
        """Names the model asked to load or call that name no tool, each once, first seen first."""
        return list(self._unknown)

    def carry_over(self) -> list[str]:
        """Loaded tools to carry into the next turn: the ``max_carried`` most recently used.

        Least recent first, so passing the list back as ``carried`` keeps their order of use.
        """
        by_use = sorted(self._loaded, key=lambda name: self._used[name])
        return by_use[-self.max_carried :] if self.max_carried else []

    def _load(self, name: str) -> None:
        self._loaded.append(name)
        self._touch(name)

    def _touch(self, name: str) -> None:
        self._tick += 1
        self._used[name] = self._tick

    def _note_unknown(self, name: str) -> None:
        if name not in self._unknown:
            self._unknown.append(name)

    # -- the meta-tool

    def _load_tools_tool(self) -> Tool:
        async def execute(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
            return self.load(_requested_names(arguments))

        return Tool(
            name=LOAD_TOOLS,
            description=(
                "Load tools from the catalogue in the system prompt so you can call them. "
                f"Up to {self.max_per_load} names per call."
            ),
            parameters=_LOAD_TOOLS_PARAMETERS,
            execute=execute,
            effect="read",
        )

    def load(self, names: Sequence[str]) -> ToolResult:
        """What a ``load_tools`` call asking for ``names`` does, and the result the model reads."""
        loaded: list[str] = []
        already: list[str] = []
        unknown: list[str] = []
        over_cap: list[str] = []
        for name in dict.fromkeys(names):
            if (
                name in self._used
                or name == LOAD_TOOLS
                or (name in self._tools and name not in self._catalogued)
            ):
                already.append(name)
                if name in self._used:
                    self._touch(name)
            elif name not in self._catalogued:
                unknown.append(name)
                self._note_unknown(name)
            elif len(loaded) >= self.max_per_load:
                over_cap.append(name)
            else:
                self._load(name)
                loaded.append(name)
        self.tools_loaded += len(loaded)
        self.redundant_loads += len(already)
        parts: list[str] = []
        if not names:
            parts.append(f"No names were given. Call {LOAD_TOOLS} with names from the catalogue.")
        if loaded:
            parts.append(f"Loaded {', '.join(loaded)}.")
        if already:
            parts.append(f"Already loaded, no need to load again: {', '.join(already)}.")
        for name in unknown:
            near = difflib.get_close_matches(name, sorted(self._catalogued), n=3, cutoff=0.6)
            hint = f" Did you mean {' or '.join(near)}?" if near else ""
            parts.append(f"No tool is named {name!r}.{hint}")
        if over_cap:
            parts.append(
                f"Only {self.max_per_load} tools can be loaded per call, so these were not: "
                f"{', '.join(over_cap)}. Load them in another call if you need them."
            )
        available = [*(tool.name for tool in self._pinned), *self._loaded]
        parts.append(
            f"Tools you can call now: {', '.join(available)}." if available else "No tools are loaded."
        )
        details = {"loaded": loaded, "already_loaded": already, "unknown": unknown, "over_cap": over_cap}
        return ToolResult(" ".join(parts), details=details, is_error=not loaded and not already)


# -- choosing tools up front


PRESELECT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": {"type": "string"}}},
    "required": ["tools"],
}


def _preselect_system(catalog: Sequence[CatalogEntry], limit: int) -> str:
    listing = "\n".join(
        f"- {entry.name}{f' ({entry.label})' if entry.label else ''}: {entry.description}"
        for entry in catalog
    )
    return (
        "You choose the tools an assistant will need for a request. From the tools below, name the ones "
        f"the request needs, at most {limit}, most useful first. Name only tools from the list.\n\n"
        f"Tools:\n{listing}"
    )


def _picked_names(value: object, catalog: Sequence[CatalogEntry], limit: int) -> list[str]:
    """Known tool names from a model's answer: ``{"tools": [...]}`` or a bare array."""
    if isinstance(value, Mapping):
        value = value.get("tools", next((v for v in value.values() if isinstance(v, list)), None))
    if not isinstance(value, list):
        return []
    known = {entry.name.casefold(): entry.name for entry in catalog}
    names: list[str] = []
    for item in value:
        raw = item.get("name") if isinstance(item, Mapping) else item
        name = known.get(raw.strip().casefold()) if isinstance(raw, str) else None
        if name is not None and name not in names:
            names.append(name)
    return names[:limit]


async def preselect(
    endpoint: Endpoint,
    model: str,
    catalog: Sequence[CatalogEntry],
    request: str,
    *,
    keywords: bool = True,
    limit: int = 5,
    on_event: Callable[[Event], object] | None = None,
) -> list[str] | None:
    """The tools a request needs, chosen before the run: by its words when they settle it, else by a model.

    Args:
        endpoint: where the small model is served.
        model: the small model; ``""`` means no preselection at all, words included.
        catalog: the tools to choose from.
        request: what the user asked.
        keywords: try ``preselect_by_keywords`` first and spend the model only when it is not confident.
        limit: the most tools to choose.
        on_event: notices about the side task.

    Returns:
        Tool names, or ``None`` when nothing usable came back; the run then declares everything.
    """
    if not model or not catalog or not request.strip():
        return None
    if keywords:
        selection = preselect_by_keywords(catalog, request, limit=limit)
        if selection.confident:
            return selection.names
    answer = await ask_json(
        endpoint,
        model,
        _preselect_system(catalog, limit),
        request,
        PRESELECT_SCHEMA,
        name="preselection",
        on_event=on_event,
        kind="preselection",
    )
    names = _picked_names(answer, catalog, limit)
    if not names:
        if answer is not None and on_event is not None:
            on_event(Notice(text="preselection named no known tool; declaring every tool", name="preselect"))
        return None
    return names
