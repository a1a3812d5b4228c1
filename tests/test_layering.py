"""The import graph keeps the layers ``docs/architecture.md`` draws, and no module imports itself in a circle.

The layer table is read from the document (its first table: one row per layer, bottom layer first), so the
picture a newcomer reads is the rule the code is held to. Every import in ``src/steadyloop`` counts:
module-level, inside functions, and under ``TYPE_CHECKING`` (a type-only import still says what a module
knows about). Cycles are looked for among imports that run (type-only ones aside: they order nothing).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "steadyloop"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: The wires of ``wire/``, each a folder that knows no other wire.
WIRES = ("openai_chat", "anthropic", "gemini")


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (a package's ``__init__`` is the package)
    line: int
    type_only: bool


@cache
def layer_table() -> list[tuple[str, list[str]]]:
    """``(layer, top-level names)`` in the order the document lists them; ``__init__`` is the package."""
    rows: list[tuple[str, list[str]]] = []
    lines = ARCHITECTURE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| layer | modules |"))
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        names = [re.sub(r"(\.py|/)$", "", name) for name in re.findall(r"`([\w.]+/?)`", cells[1])]
        rows.append((cells[0], names))
    return rows


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    path = SRC / dotted.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.body:  # type: ignore[union-attr]
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_of(path: Path) -> Iterator[Import]:
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            targets = [
                f"{origin}.{alias.name}" if _is_module(f"{origin}.{alias.name}") else origin
                for alias in node.names
            ]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target == "steadyloop" or target.startswith("steadyloop."):
                yield Import(module, target, node.lineno, id(node) in type_only)


@cache
def all_imports() -> tuple[Import, ...]:
    return tuple(found for path in sorted(PACKAGE.rglob("*.py")) for found in imports_of(path))


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_table_names_every_top_level_module_once() -> None:
    listed = [name for _, names in layer_table() for name in names]
    assert len(listed) == len(set(listed)), "a module is in two layers"
    present = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(listed) == present, (
        f"docs/architecture.md's layer table lists {sorted(set(listed) - present)} that do not exist and "
        f"leaves out {sorted(present - set(listed))}"
    )


def test_no_import_points_up() -> None:
    layer = {name: index for index, (_, names) in enumerate(layer_table()) for name in names}
    titles = [title for title, _ in layer_table()]
    upward = [
        f"{found.source}:{found.line} imports {found.target} ({titles[layer[_top(found.source)]]} -> "
        f"{titles[layer[_top(found.target)]]})"
        for found in all_imports()
        if layer[_top(found.target)] > layer[_top(found.source)]
    ]
    assert upward == []


@pytest.mark.parametrize("wire", WIRES)
def test_a_wire_knows_no_other_wire(wire: str) -> None:
    others = tuple(f"steadyloop.wire.{other}" for other in WIRES if other != wire)
    crossing = [
        f"{found.source}:{found.line} imports {found.target}"
        for found in all_imports()
        if found.source.startswith(f"steadyloop.wire.{wire}") and found.target.startswith(others)
    ]
    assert crossing == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_in_a_circle() -> None:
    edges: dict[str, set[str]] = {_module_of(p): set() for p in PACKAGE.rglob("*.py")}
    for found in all_imports():
        if not found.type_only and found.target != found.source and found.target in edges:
            edges[found.source].add(found.target)
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
