"""How MCP values become steadyloop ones: tool names, effect classes, results (pure, no I/O).

The rules and their reasons are in ``steadyloop.tools.mcp``'s docstring; this module is internal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import mcp.types as mt

from ..messages import ContentPart, ImagePart, TextPart
from .definition import EffectClass, ToolResult

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


def _clean(name: str) -> str:
    return _INVALID_NAME_CHARS.sub("_", name)[:_MAX_NAME] or "tool"


def assign_names(entries: Sequence[tuple[str, str]]) -> list[str]:
    """Valid, unique tool names for ``(server label, MCP name)`` pairs, in the same order."""
    bases = [_clean(name) for _, name in entries]
    servers_of: dict[str, set[str]] = {}
    for (label, _), base in zip(entries, bases, strict=True):
        servers_of.setdefault(base, set()).add(label)
    candidates = [
        base if len(servers_of[base]) == 1 else _clean(f"{label}_{base}")
        for (label, _), base in zip(entries, bases, strict=True)
    ]
    # Names that were valid as sent claim theirs first, so only the rewritten ones ever get a suffix.
    order = sorted(range(len(entries)), key=lambda i: bases[i] != entries[i][1])
    taken: set[str] = set()
    names = [""] * len(entries)
    for i in order:
        name, n = candidates[i], 2
        while name in taken:
            suffix = f"_{n}"
            name, n = candidates[i][: _MAX_NAME - len(suffix)] + suffix, n + 1
        taken.add(name)
        names[i] = name
    return names


def effect_of(annotations: mt.ToolAnnotations | None) -> tuple[EffectClass, bool]:
    """The effect class and dedupe flag, reading absent hints with the MCP spec's defaults."""
    hints = annotations or mt.ToolAnnotations()
    if hints.read_only_hint:
        return "read", True
    idempotent = bool(hints.idempotent_hint)
    if hints.destructive_hint is None or hints.destructive_hint:
        return "destructive", idempotent
    # MCP has no reversibility hint; an additive update that repeats harmlessly is the nearest thing.
    return ("mutate-reversible" if idempotent else "mutate-irreversible"), idempotent


def to_result(result: mt.CallToolResult, server: str, tool: str) -> ToolResult:
    parts = [part for block in result.content for part in _parts(block)]
    details: dict[str, Any] = {"server": server, "tool": tool}
    if result.structured_content is not None:
        details["structured_content"] = result.structured_content
        if not parts:  # the model would otherwise see nothing of a structured-only answer
            parts = [TextPart(json.dumps(result.structured_content, ensure_ascii=False, default=str))]
    content: str | tuple[ContentPart, ...]
    if all(isinstance(part, TextPart) for part in parts):
        content = "\n".join(part.text for part in parts if isinstance(part, TextPart))
    else:
        content = tuple(parts)
    return ToolResult(content, details=details, is_error=result.is_error)


def _parts(block: mt.ContentBlock) -> list[ContentPart]:
    if isinstance(block, mt.TextContent):
        return [TextPart(block.text)]
    if isinstance(block, mt.ImageContent):
        return [ImagePart(url=f"data:{block.mime_type};base64,{block.data}")]
    if isinstance(block, mt.AudioContent):
        return [TextPart(f"[audio ({block.mime_type}) not shown]")]
    if isinstance(block, mt.ResourceLink):
        return [
            TextPart(f"[resource {block.uri}" + (f": {block.description}]" if block.description else "]"))
        ]
    resource = block.resource
    if isinstance(resource, mt.TextResourceContents):
        return [TextPart(f"[resource {resource.uri}]\n{resource.text}")]
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return [TextPart(f"[resource {resource.uri}]"), ImagePart(url=f"data:{mime};base64,{resource.blob}")]
    return [TextPart(f"[resource {resource.uri} ({mime}), binary, not shown]")]


def cancelled_result(server: str, tool: str) -> ToolResult:
    return ToolResult(
        f"The call to {tool} was cancelled.",
        details={"server": server, "tool": tool, "cancelled": True},
        is_error=True,
    )
