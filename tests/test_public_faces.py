"""The shells stand on the public API, and every package says whether it is public.

The command line and the server import what an outside user could: names in the ``__all__`` of the package
root or of a module whose docstring says it is public (``(public)`` in its first paragraph), never a
deeper module (which no docstring calls public). Names that left the root still import from it for one release, with a warning naming
their new place.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import warnings
from pathlib import Path

import pytest

import steadyloop as sl

from .test_layering import PACKAGE, SRC

SHELLS = ("cli", "server")


def _first_paragraph(module: str) -> str:
    path = SRC / module.replace(".", "/")
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").split("\n\n")[0]


def _is_public(module: str) -> bool:
    return module == "steadyloop" or "(public" in _first_paragraph(module)


def _names_imported(path: Path) -> list[tuple[str, str, int]]:
    """``(module, name, line)`` of every ``from steadyloop... import name`` in a shell's file."""
    module = ".".join(path.relative_to(SRC).with_suffix("").parts)
    package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            origin = ".".join([*base, node.module] if node.module else base)
        else:
            origin = node.module or ""
        found += [(origin, alias.name, node.lineno) for alias in node.names]
    return found


@pytest.mark.parametrize("shell", SHELLS)
def test_a_shell_imports_only_public_names(shell: str) -> None:
    own = f"steadyloop.{shell}"
    wrong = []
    for path in sorted((PACKAGE / shell).rglob("*.py")):
        for module, name, line in _names_imported(path):
            if not module.startswith("steadyloop") or module == own or module.startswith(own + "."):
                continue
            where = f"{path.relative_to(SRC)}:{line} imports {name} from {module}"
            if not _is_public(module):
                wrong.append(f"{where}, which is not public")
            elif name not in getattr(importlib.import_module(module), "__all__", ()):
                wrong.append(f"{where}, which is not in its __all__")
    assert wrong == []


def test_every_package_says_whether_it_is_public() -> None:
    silent = [
        str(path.parent.relative_to(SRC))
        for path in sorted(PACKAGE.rglob("*/__init__.py"))
        if not {"public", "internal"}
        & set(
            _first_paragraph(".".join(path.parent.relative_to(SRC).parts))
            .replace("(", " ")
            .replace(":", " ")
            .replace(";", " ")
            .replace(")", " ")
            .split()
        )
    ]
    assert silent == []


@pytest.mark.parametrize("name", sorted(sl._MOVED))
def test_a_name_that_left_the_root_still_imports_from_it_with_a_warning(name: str) -> None:
    module, _, new = sl._MOVED[name].partition(":")
    with pytest.warns(DeprecationWarning, match=f"steadyloop.{name} is deprecated.*{module}.{new or name}"):
        value = getattr(sl, name)
    assert value is getattr(importlib.import_module(module), new or name)
    assert name not in sl.__all__ and _is_public(module)


def test_no_name_that_left_the_root_is_also_a_submodule_name() -> None:
    """Once imported, a submodule is the package's attribute of its name, so its warning could never fire."""
    shadowed = [
        name for name in sorted(sl._MOVED) if importlib.util.find_spec(f"steadyloop.{name}") is not None
    ]
    assert shadowed == []


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = sl.no_such_name  # type: ignore[attr-defined]
