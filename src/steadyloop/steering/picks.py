"""A pick among a listing's entries held to what the listing says of them; sans I/O.

Asked "Which file in src/click has the most lines?", the 1.5B model named _textwrap.py (41 lines) in a
listing whose core.py has 3,042; asked "Which tests folder has the most files?", it answered "tests". A
listing gives each file's bytes and lines and each folder's files and folders (``cli/file_reads.py``), so
the pick a request asks for (the most or fewest lines, the largest or smallest, the most or fewest files in
a folder) is read off it, and an answer that names no entry tied for it is wrong. Linear in the texts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .result_counts import folder_counts, folder_holds, plural, sized_values, whole_listing

__all__ = ["names_entry", "wrong_pick"]

# What a pick among a listing's files measures, and which end: the most lines ("the most lines", "the
# longest"), the fewest, the most bytes ("the largest") or the fewest; in English, Spanish, French, German,
# Portuguese and Italian (``asked.py``).
_FILE_MEASURE = re.compile(
    r"\b(?:(?P<most_lines>most\s+lines|longest|m[aá]s\s+l[ií]neas|m[aá]s\s+larg[oa]|plus\s+de\s+lignes"
    r"|plus\s+long(?:ue)?|meisten\s+zeilen|l[äa]ngste\w*|mais\s+linhas|mais\s+long[oa]|pi[uù]\s+righe"
    r"|pi[uù]\s+lung[oa])"
    r"|(?P<fewest_lines>(?:fewest|least)\s+lines|shortest|menos\s+l[ií]neas|m[aá]s\s+cort[oa]"
    r"|moins\s+de\s+lignes|plus\s+court(?:e)?|wenigsten\s+zeilen|k[üu]rzeste\w*|menos\s+linhas"
    r"|mais\s+curt[oa]|meno\s+righe|pi[uù]\s+cort[oa])"
    r"|(?P<most_bytes>largest|biggest|heaviest|m[aá]s\s+grande|(?:el|la)\s+mayor|(?:o|a)\s+maior|de\s+ma[iy]or\s+tama(?:ño|nho)|plus\s+gros(?:se)?|plus\s+grand(?:e)?"
    r"|plus\s+lourd(?:e)?|gr[öo](?:ß|ss)te\w*|pi[uù]\s+grande)"
    r"|(?P<fewest_bytes>smallest|lightest|m[aá]s\s+pequeñ[oa]|(?:el|la|o|a)\s+menor|de\s+menor\s+tama(?:ño|nho)|plus\s+petit(?:e)?|kleinste\w*"
    r"|pi[uù]\s+piccol[oa]))\b",
    re.IGNORECASE,
)
# What a pick among a listing's folders measures: what each holds directly ("Which tests folder has the
# most files?", "the folder with the fewest entries", "la carpeta con más archivos").
_FOLDER_MEASURE = re.compile(
    r"\b(?P<end>most|fewest|least|m[aá]s|menos|plus\s+de|moins\s+de|meisten|wenigsten|mais|pi[uù]|meno)\s+"
    r"(?:(?P<files>files|archivos|ficheros|fichiers|dateien|arquivos|file)"
    r"|(?P<entries>entries|items|things|elementos|[ée]l[ée]ments|eintr[äa]ge|elementi)"
    r"|(?P<folders>(?:sub)?folders|director(?:y|ies)|(?:sub)?carpetas|(?:sous-)?dossiers|r[ée]pertoires"
    r"|(?:unter)?ordner|verzeichnisse|pastas|cartelle))\b",
    re.IGNORECASE,
)
# A folder named in the request: a pick of folders. One that names no file as well ("Which folder is the
# largest?") is no pick of files: a listing gives a folder no size.
_FOLDER_WORD = re.compile(
    r"\b(?:(?:sub)?folders?|director(?:y|ies)|dirs?|(?:sub)?carpetas?|dossiers?|r[ée]pertoires?|ordner"
    r"|verzeichnis(?:se)?|pastas?|cartell[ae])\b",
    re.IGNORECASE,
)
_FILE_WORD = re.compile(
    r"\b(?:files?|archivos?|ficheros?|fichiers?|dateien|datei|arquivos?)\b", re.IGNORECASE
)
_FEWEST = frozenset(("fewest", "least", "menos", "moins de", "wenigsten", "meno"))
_MOST_TIED = 20


def names_entry(answer: str, entry: str) -> bool:
    """Whether ``answer`` names the listed ``entry`` (a folder's trailing slash aside), as a whole name:
    not "core.py" in "core.pyi", nor "docs" in "docs-old"."""
    name = entry.rstrip("/")
    if not name:
        return True
    pattern = rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.[A-Za-z0-9])"
    return re.search(pattern, answer, re.IGNORECASE) is not None


def _measured(request: str, listing: str) -> tuple[dict[str, int], str, str, bool] | None:
    """Each entry's value for the pick ``request`` asks for, the unit's two forms, and which end is
    asked (the most); ``None`` when it asks for no pick this listing can weigh."""
    folder = _FOLDER_WORD.search(request)
    held = _FOLDER_MEASURE.search(request) if folder else None
    if held is not None:
        counts = folder_counts(listing)
        kind = "files" if held.group("files") else "entries" if held.group("entries") else "folders"
        values = {n: folder_holds(h, kind) for n, h in counts.items()}
        unit = {
            "files": ("file", "files"),
            "entries": ("entry", "entries"),
            "folders": ("folder", "folders"),
        }[kind]
        end = " ".join(held.group("end").lower().split())
        return values, *unit, end not in _FEWEST
    measure = _FILE_MEASURE.search(request)
    if measure is None or (folder and not _FILE_WORD.search(request)):
        return None
    lines = bool(measure.group("most_lines") or measure.group("fewest_lines"))
    most = bool(measure.group("most_lines") or measure.group("most_bytes"))
    unit = ("line", "lines") if lines else ("byte", "bytes")
    return sized_values(listing, lines=lines), *unit, most


def wrong_pick(answer: str, results: Sequence[str], request: str) -> str | None:
    """The entry one whole listing among ``results`` picks for a ``request`` that asks for the extreme one
    ("core.py, with 3,042 lines"; "server/, with 45 files"), when ``answer`` names none that ties for it;
    ``None`` when it names one, or no such pick was asked or can be read."""
    # The one whole listing among the results: after it, the 1.5B model searched for "lines" as well.
    listings = [r for r in results if whole_listing(r) is not None]
    if len(listings) != 1:
        return None
    measured = _measured(request, listings[0])
    if measured is None:
        return None
    values, one, many, most = measured
    if len(values) < 2:
        return None
    extreme = max(values.values()) if most else min(values.values())
    picked = [name for name, value in values.items() if value == extreme]
    # So many tied that none of them is the pick (and looking for each would grow with the listing).
    if len(picked) > _MOST_TIED or any(names_entry(answer, name) for name in picked):
        return None
    return f"{picked[0]}, with {extreme:,} {plural(extreme, one, many)}"
