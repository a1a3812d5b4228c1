"""Writes ``docs/llms.txt``: every name in ``steadyloop.__all__`` with its signature and one-line summary.

An llms.txt-style index, generated from the code so it cannot drift: names are grouped by the module that
defines them (as the package root imports them), each with its signature and the first line of its
docstring (for a constant, its ``#:`` comment). ``tests/test_api_index.py`` fails when the checked-in file
differs from what this writes.

Usage: ``python -m steadyloop._api_index`` (rewrite), ``python -m steadyloop._api_index --check``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["generate", "main"]

REGENERATE = "python -m steadyloop._api_index"
_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = _ROOT / "docs" / "llms.txt"
_MAX_VALUE = 80

_HEADER = f"""\
# steadyloop

> An agent runtime that behaves the same against every LLM endpoint, hosted or local: stream a turn, run
> the tools it asked for, repeat, and survive what real servers send.

The sections named after a module without a note are importable from the package root (`import steadyloop
as sl`); those marked "not at the root" are the building blocks, imported from the public submodule they
name. Optional parts live in their own modules: `steadyloop.tools.mcp` (the `mcp` extra),
`steadyloop.testing`, `steadyloop.local` and `steadyloop.sessions`. Generated from the code by
`{REGENERATE}`; do not edit by hand.
"""

#: The public submodules whose names the index lists besides the root's.
FACES = (
    "steadyloop.context",
    "steadyloop.events",
    "steadyloop.loop",
    "steadyloop.sizing",
    "steadyloop.spec",
    "steadyloop.steering",
    "steadyloop.telemetry",
    "steadyloop.tools",
    "steadyloop.turn",
    "steadyloop.untrusted",
    "steadyloop.wire",
)


class _Raw:
    """Text shown as is where ``inspect`` would show a value's repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _value(value: object) -> str:
    text = repr(value)
    if isinstance(value, frozenset | set):  # a set's order changes with the hash seed
        inner = ", ".join(sorted(repr(v) for v in value))
        text = f"{type(value).__name__}({{{inner}}})" if value else f"{type(value).__name__}()"
    if isinstance(value, tuple | list | frozenset | set | dict) and len(text) > _MAX_VALUE:
        return f"<{type(value).__name__} of {len(value)}>"
    if " at 0x" in text:  # an address changes every run
        return f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _annotation(annotation: object) -> object:
    if annotation is inspect.Parameter.empty:
        return annotation
    return _Raw(annotation if isinstance(annotation, str) else inspect.formatannotation(annotation))


def _signature(obj: object) -> str:
    try:
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    params = [
        p.replace(
            annotation=_annotation(p.annotation),
            default=p.default if p.default is inspect.Parameter.empty else _Raw(_value(p.default)),
        )
        for p in signature.parameters.values()
    ]
    return str(
        signature.replace(parameters=params, return_annotation=_annotation(signature.return_annotation))
    )


def _summary(obj: object, name: str) -> str:
    doc = obj.__doc__ if isinstance(obj.__doc__, str) else None
    if not doc or doc.startswith(f"{name}("):  # a dataclass's generated docstring repeats its signature
        return ""
    return inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ").strip()


def _sources(package: str) -> dict[str, str]:
    """Which module each root name is imported from, read off the package's ``__init__``."""
    init = importlib.import_module(package).__file__
    assert init is not None
    where: dict[str, str] = {}
    for node in ast.parse(Path(init).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            module = f"{package}.{node.module}" if node.module else package
            for alias in node.names:
                where[alias.asname or alias.name] = module
    return where


def _comment(module: str, name: str) -> str:
    """The ``#:`` comment above a constant's assignment in its module (or, for a package, its modules)."""
    loaded = importlib.import_module(module)
    if loaded.__file__ is None:
        return ""
    source = Path(loaded.__file__)
    files = sorted(source.parent.glob("*.py")) if hasattr(loaded, "__path__") else [source]
    pattern = re.compile(rf"^{re.escape(name)}\s*(?::[^=]*)?=")
    for file in files:
        lines = file.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if pattern.match(line):
                notes: list[str] = []
                j = i - 1
                while j >= 0 and lines[j].startswith("#:"):
                    notes.insert(0, lines[j][2:].strip())
                    j -= 1
                return " ".join(notes)
    return ""


def _entry(name: str, obj: object, module: str) -> str:
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
        head = f"`{name}{_signature(obj)}`"
        summary = _summary(obj, name)
    else:
        head = f"`{name} = {_value(obj)}`"
        summary = _comment(module, name)
    return f"- {head}: {summary}" if summary else f"- {head}"


def generate(package: str = "steadyloop") -> str:
    """The index for ``package``, as the text ``docs/llms.txt`` holds."""
    root = importlib.import_module(package)
    where = _sources(package)
    groups: dict[str, list[str]] = {}
    for name in sorted(root.__all__, key=str.lower):
        if name.startswith("__"):
            continue
        module = where.get(name, package)
        groups.setdefault(module, []).append(_entry(name, getattr(root, name), module))
    parts = [_HEADER]
    for module in sorted(groups):
        parts.append(f"## {module}\n\n" + "\n".join(groups[module]) + "\n")
    if package == "steadyloop":
        parts += [_face(face, set(root.__all__)) for face in FACES if importlib.util.find_spec(face)]
    return "\n".join(parts)


def _face(face: str, at_root: set[str]) -> str:
    """The section of a public submodule: its names that the root does not carry."""
    loaded = importlib.import_module(face)
    entries = [
        _entry(name, getattr(loaded, name), face)
        for name in sorted(loaded.__all__, key=str.lower)
        if name not in at_root
    ]
    return f"## {face} (not at the root)\n\n" + "\n".join(entries) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the index, or with ``--check`` say whether the written one is current; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m steadyloop._api_index", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="fail if the file differs from the code")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where the index goes")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date; regenerate it with: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
