"""bench/main_job.py: the grading tells an answer that names every entry from one that leaves some out,
and sees a folder marked as one in each way answers mark it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._bench import load

main_job = load("main_job")


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    (tmp_path / "atlas").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = atlas\n")
    return tmp_path


@pytest.mark.parametrize(
    ("answer", "right", "marked"),
    [
        (
            "- atlas/ (folder: 1 file, 2 folders)\n- docs/ (folder: 1 file)\n- setup.cfg (24 bytes)",
            True,
            True,
        ),
        ("In the folder: atlas, docs; and the file setup.cfg.", True, True),
        ("atlas (folder), docs (folder) and setup.cfg.", True, True),
        ("Folders: atlas, docs. Files: setup.cfg.", True, True),
        # Written so by the 1.5B model once the listing gave each folder's counts.
        (
            "The atlas folder contains 1 file and 2 folders. The docs folder contains 1 file and 1 folder. "
            "The setup.cfg file is 24 bytes in size and has 2 lines.",
            True,
            True,
        ),
        ("There are 3 entries: atlas, docs and setup.cfg.", True, False),
        ("The atlas folder and setup.cfg.", False, True),  # docs left out
    ],
)
def test_grading(nested: Path, answer: str, right: bool, marked: bool) -> None:
    run = main_job.Run("nested", answer=answer)
    main_job.grade(run, nested)
    assert run.right is right
    if right:
        assert run.folders_marked is marked


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        ("There are no files or folders in this directory.", True),
        ("The folder is empty.", True),
        # The 1.5B model's, asked "¿Qué hay en esta carpeta?" of an empty folder
        ("No hay archivos ni carpetas en esta carpeta.", True),
        ("En esta carpeta no hay nada.", True),
        ("La carpeta está vacía.", True),
        ("Le dossier est vide.", True),
        ("Der Ordner ist leer.", True),
        ("¿Qué hay en esta carpeta?", False),  # the question said back: no answer
        ("No pude leer la carpeta.", False),  # "leer" is Spanish for reading, not German for empty
    ],
)
def test_an_empty_folder_is_said_empty_in_the_languages_asked(
    tmp_path: Path, answer: str, right: bool
) -> None:
    run = main_job.Run("empty", answer=answer)
    main_job.grade(run, tmp_path)
    assert run.right is right
