"""What a request asks of its tool results, read in the languages the bundled model is asked in."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.asked import COUNT_ASKED, NOT_CONTENTS_ASKED, PICK_ASKED
from steadyloop.steering.grounding import AnswerGaps, answer_gaps

LISTING = "- docs/ (folder: 3 files)\n- src/ (folder: 1 folder)\n- README.md (40 bytes, 2 lines)\n- setup.py (9 bytes, 1 line)"


@pytest.mark.parametrize(
    ("request_text", "asked"),
    [
        # what is here: held to every entry
        ("What is in this folder?", "contents"),
        ("¿Qué hay en esta carpeta?", "contents"),
        ("Qu'y a-t-il dans ce dossier ?", "contents"),
        ("Was ist in diesem Ordner?", "contents"),  # not English "was": a yes or no
        ("Was sind die Dateien hier?", "contents"),
        ("O que há nesta pasta?", "contents"),
        ("Cosa c'è in questa cartella?", "contents"),
        ("Quels fichiers sont dans docs ?", "contents"),  # "which" asks for contents here
        # a count
        ("How many files are in docs?", "count"),
        ("¿Cuántos archivos hay en la carpeta docs?", "count"),
        ("Combien de fichiers y a-t-il dans docs ?", "count"),
        ("Wie viele Dateien sind in docs?", "count"),
        ("Quantos arquivos há na pasta docs?", "count"),
        ("Quanti file ci sono in docs?", "count"),
        # a pick
        ("Which file is the largest?", "pick"),
        ("¿Cuál es el archivo más grande?", "pick"),
        ("Quel fichier du dossier docs est le plus grand ?", "pick"),
        ("Welche Datei ist die größte?", "pick"),
        ("Welcher Ordner hat die meisten Dateien?", "pick"),
        ("Qual é o maior arquivo?", "pick"),
        ("Qual è il file più grande?", "pick"),
        # what a listing only helps answer
        ("Was the file changed?", "other"),
        ("How do I run the tests?", "other"),
        ("¿Cómo ejecuto las pruebas?", "other"),
        ("Comment lancer les tests ?", "other"),
        ("Wie führe ich die Tests aus?", "other"),
        ("Ist das eine Datei?", "other"),
        ("Onde fica o arquivo de configuração?", "other"),
        ("Dove si trova il file?", "other"),
    ],
)
def test_what_a_request_asks_is_read_in_its_own_language(request_text: str, asked: str) -> None:
    count = COUNT_ASKED.search(request_text) is not None
    pick = PICK_ASKED.search(request_text) is not None
    other = NOT_CONTENTS_ASKED.match(request_text) is not None
    read = "count" if count else "pick" if pick else "other" if other else "contents"
    assert read == asked


def test_a_german_what_is_here_is_held_to_every_entry() -> None:
    # Asked so, the 1.5B model answered "In this folder, there are 3 files and 2 folders. ..." naming one.
    gaps = answer_gaps("Es gibt README.md und setup.py.", [LISTING], "Was ist in diesem Ordner?")
    assert gaps.missing == ("docs/", "src/")
    assert not answer_gaps("docs/, src/, README.md, setup.py", [LISTING], "Was ist in diesem Ordner?")


def test_a_count_asked_in_spanish_is_held_to_the_count_not_to_the_names() -> None:
    asked = "¿Cuántos archivos hay aquí?"
    assert answer_gaps("Hay 2 archivos.", [LISTING], asked) == AnswerGaps()
    assert answer_gaps("Hay 4 archivos y carpetas.", [LISTING], asked) == AnswerGaps()
    # "archivos" are files: the entries alone, folders among them unsaid, are no answer to it
    held = "2 files and 2 folders (4 entries in all)"
    assert answer_gaps("Hay 4 entradas.", [LISTING], asked).count == held
    assert answer_gaps("Hay 9 archivos.", [LISTING], asked).count == held


@given(st.text())
def test_reading_any_request_is_total(text: str) -> None:
    for reader in (COUNT_ASKED, PICK_ASKED):
        reader.search(text)
    NOT_CONTENTS_ASKED.match(text)


def test_reading_a_huge_request_is_linear() -> None:
    for text in ("más " * 50_000, "le plus " * 40_000, "was " * 50_000, "¿" * 200_000, "größte" * 30_000):
        started = time.perf_counter()
        COUNT_ASKED.search(text)
        PICK_ASKED.search(text)
        NOT_CONTENTS_ASKED.match(text)
        assert time.perf_counter() - started < 2


SIZED = "- core.py (95,000 bytes, 3,042 lines)\n- io.py (1,400 bytes, 41 lines)\n- tiny.py (3 bytes, 1 line)"
FOLDERS = "- cli/ (folder: 22 files)\n- server/ (folder: 45 files)\n- data/ (folder: 3 files, 5 folders)"


@pytest.mark.parametrize(
    ("request_text", "answer", "listing", "pick"),
    [
        ("Quel fichier est le plus grand ?", "io.py", SIZED, "core.py, with 95,000 bytes"),
        ("¿Cuál es el archivo de mayor tamaño?", "io.py", SIZED, "core.py, with 95,000 bytes"),
        ("¿Cuál es el archivo más grande?", "core.py", SIZED, None),
        ("Welche Datei hat die meisten Zeilen?", "tiny.py", SIZED, "core.py, with 3,042 lines"),
        ("Qual é o menor arquivo?", "core.py", SIZED, "tiny.py, with 3 bytes"),
        ("Qual è il file più piccolo?", "io.py", SIZED, "tiny.py, with 3 bytes"),
        ("¿Qué carpeta tiene más archivos?", "cli/", FOLDERS, "server/, with 45 files"),
        ("Welcher Ordner hat die meisten Dateien?", "cli", FOLDERS, "server/, with 45 files"),
        ("Quel dossier contient le plus de sous-dossiers ?", "cli", FOLDERS, "data/, with 5 folders"),
        ("Which file mentions a mayor?", "io.py", SIZED, None),  # "a mayor" is no Spanish "el mayor"
    ],
)
def test_a_pick_asked_in_another_language_is_held_to_the_listing(
    request_text: str, answer: str, listing: str, pick: str | None
) -> None:
    assert answer_gaps(answer, [listing], request_text).pick == pick
