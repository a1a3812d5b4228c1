"""How ``parse_spec`` walks a document: refusals and warnings by path, and one reader per kind of value.

A container of the wrong kind is refused; any other value that cannot be used is dropped with a warning,
and so is anything that looks like a credential.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from typing import cast

from ._values import JsonValue, SpecProblem

__all__ = ["Path", "Reader", "kind", "short"]

Path = tuple[str | int, ...]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MAX_DEPTH = 32  # for free-form JSON (extra_body, hook arguments); a document's own shape is shallow

# A field name that can only mean a secret. The format has no field for one, so a document that carries
# one was written for some other tool; saying so beats dropping it as merely unknown.
_CREDENTIAL_NAME = re.compile(
    r"^(?:api_?key|apikey|x_?api_?key|access_?token|auth_?token|token|secret|client_?secret|password"
    r"|passwd|authorization|bearer|credentials?|private_?key)$",
    re.IGNORECASE,
)
# Values shaped like the keys providers issue. A literal one in a document would travel with it.
# Each alternative starts only where a run of key characters starts, so a long run is scanned once.
_CREDENTIAL_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])"
    r"(?:sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}(?![A-Za-z0-9])|AIza[0-9A-Za-z_-]{30,}"
    r"|hf_[A-Za-z0-9]{30,}|glpat-[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\."
    r"|Bearer[ \t]+(?!\$\{)[A-Za-z0-9._~+/=-]{16,})"
)


def _credential_name(key: str) -> bool:
    return bool(_CREDENTIAL_NAME.match(key.replace("-", "_")))


class Reader:
    """One parse: the errors and warnings so far, and readers for each kind of value."""

    def __init__(self) -> None:
        self.errors: list[SpecProblem] = []
        self.warnings: list[SpecProblem] = []
        self._seen: set[int] = set()

    def refuse(self, path: Path, message: str) -> None:
        self.errors.append(SpecProblem(path, message))

    def warn(self, path: Path, message: str) -> None:
        self.warnings.append(SpecProblem(path, message))

    # -- containers: the wrong kind is refused ---------------------------------------------------------

    def table(self, value: object, path: Path) -> Mapping[str, object] | None:
        """A table's fields with text keys; ``None`` when absent or refused."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.refuse(path, f"should be a table (an object), got {kind(value)}")
            return None
        if not self._first_visit(value, path):
            return None
        out: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.warn(path, f"a key must be text, got {kind(key)} {short(key)}; ignored")
            elif item is not None:
                out[key] = item
        return out

    def array(self, value: object, path: Path) -> list[object] | None:
        """A list's items (``null`` items left out); ``None`` when absent or refused."""
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            self.refuse(path, f"should be a list, got {kind(value)}")
            return None
        if not self._first_visit(value, path):
            return None
        return list(value)

    def fields(self, table: Mapping[str, object], path: Path, known: Collection[str]) -> None:
        """Warn about every field of ``table`` not in ``known``."""
        for key in table:
            if key in known:
                continue
            if _credential_name(key):
                self.warn(
                    (*path, key),
                    "looks like a credential; an agent document never carries one (the host supplies keys)",
                )
            else:
                self.warn((*path, key), "unknown field; ignored")

    def _first_visit(self, value: object, path: Path) -> bool:
        # Input from JSON or TOML is a tree; a container met twice is a cycle or a shared object, which no
        # document can spell, and walking it again could take exponential time.
        if not value:
            return True
        if id(value) in self._seen:
            self.refuse(path, "appears twice in the document (a cycle or a shared object)")
            return False
        self._seen.add(id(value))
        return True

    # -- values: the wrong type or range is dropped with a warning -------------------------------------

    def text(self, value: object, path: Path, *, empty: bool = True) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.warn(path, f"should be text, got {kind(value)}; ignored")
            return None
        if not empty and not value:
            self.warn(path, "should not be empty; ignored")
            return None
        if _CREDENTIAL_VALUE.search(value):
            self.warn(path, "looks like a credential; an agent document never carries one; ignored")
            return None
        return value

    def name(self, value: object, path: Path) -> str | None:
        text = self.text(value, path)
        if text is not None and not _NAME.match(text):
            self.warn(path, f"{short(text)} is not a name (1-64 letters, digits, '_' or '-'); ignored")
            return None
        return text

    def flag(self, value: object, path: Path) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        self.warn(path, f"should be true or false, got {kind(value)}; ignored")
        return None

    def number(
        self, value: object, path: Path, low: float, high: float, *, above: bool = False
    ) -> float | None:
        """A number in ``[low, high]`` (``(low, high]`` when ``above``)."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.warn(path, f"should be a number, got {kind(value)}; ignored")
            return None
        number = float(value) if isinstance(value, float) or abs(value) < 2**53 else math.inf
        if not math.isfinite(number) or number < low or number > high or (above and number == low):
            bound = f"above {low:g}" if above else f"at least {low:g}"
            self.warn(path, f"{short(value)} is out of range ({bound}, at most {high:g}); ignored")
            return None
        return number

    def whole(self, value: object, path: Path, low: int, high: int) -> int | None:
        """A whole number in ``[low, high]``; ``4.0`` reads as ``4``."""
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.warn(path, f"should be a whole number, got {kind(value)} {short(value)}; ignored")
            return None
        if not low <= value <= high:
            self.warn(path, f"{short(value)} is out of range ({low} to {high}); ignored")
            return None
        return value

    def choice(self, value: object, path: Path, choices: Collection[str]) -> str | None:
        text = self.text(value, path)
        if text is not None and text not in choices:
            self.warn(path, f"{short(text)} is not one of {', '.join(choices)}; ignored")
            return None
        return text

    def names(
        self, value: object, path: Path, read: Callable[[object, Path], str | None]
    ) -> tuple[str, ...] | None:
        """A list of distinct names; bad or repeated items are dropped with a warning."""
        items = self.array(value, path)
        if items is None:
            return None
        out: dict[str, None] = {}
        for i, item in enumerate(items):
            if item is None:
                continue
            name = read(item, (*path, i))
            if name is None:
                continue
            if name in out:
                self.warn((*path, i), f"{short(name)} is listed twice; the repeat is ignored")
                continue
            out[name] = None
        return tuple(out)

    def json(self, value: object, path: Path, depth: int = 0) -> tuple[bool, JsonValue]:
        """A copy of free-form JSON; ``(False, None)`` when it cannot be kept."""
        if value is None or isinstance(value, bool | str):
            if isinstance(value, str) and self.text(value, path) is None:
                return False, None
            return True, value
        if isinstance(value, int):
            return True, value
        if isinstance(value, float):
            if math.isfinite(value):
                return True, value
            self.warn(path, f"{value} is not a number JSON can carry; ignored")
            return False, None
        if depth >= _MAX_DEPTH:
            self.warn(path, f"nested deeper than {_MAX_DEPTH} levels; ignored")
            return False, None
        if isinstance(value, Mapping):
            table = self.table(value, path)
            if table is None:
                return False, None
            obj: dict[str, JsonValue] = {}
            for key, item in table.items():
                if _credential_name(key):
                    self.warn((*path, key), "looks like a credential; an agent document never carries one")
                    continue
                ok, copied = self.json(item, (*path, key), depth + 1)
                if ok:
                    obj[key] = copied
            return True, obj
        if isinstance(value, list | tuple):
            items = self.array(value, path)
            if items is None:
                return False, None
            array: list[JsonValue] = []
            for i, item in enumerate(items):
                ok, copied = self.json(item, (*path, i), depth + 1)
                if ok:
                    array.append(copied)
            return True, array
        self.warn(path, f"{kind(value)} is not a JSON value; ignored")
        return False, None

    def json_table(self, value: object, path: Path) -> dict[str, JsonValue] | None:
        if value is not None and not isinstance(value, Mapping):
            self.refuse(path, f"should be a table (an object), got {kind(value)}")
            return None
        ok, copied = self.json(value, path)
        return cast(dict[str, JsonValue], copied) if ok and copied is not None else None


def kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def short(value: object, limit: int = 60) -> str:
    try:
        text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge number"
    except Exception:  # a value whose repr fails still gets a problem report
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"
