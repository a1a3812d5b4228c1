"""A license file's license, said above its text when the command's read_file reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.licenses import is_license_file, licenses_in
from steadyloop.cli.tools import default_tools
from steadyloop.tools.definition import ToolContext

from ..edges._edges import LINEAR_BOUND, growth

BSD_3 = """Copyright 2010 Pallets

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are
met:

3.  Neither the name of the copyright holder nor the names of its
    contributors may be used to endorse or promote products derived from
    this software without specific prior written permission.
"""
MIT = """MIT License

Copyright (c) 2015 Hynek Schlawack and the attrs contributors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
"""
GPL_3 = """                    GNU GENERAL PUBLIC LICENSE
                       Version 3, 29 June 2007

 Preamble

  The GNU General Public License is a free, copyleft license for
software and other kinds of works.

  The licenses for most software and other practical works are designed
to take away your freedom to share and change the works.  By contrast,
the GNU General Public License is intended to guarantee your freedom to
share and change all versions of a program--to make sure it remains free
software for all its users.

  ... consider it more useful to permit linking proprietary applications with
the library.  If this is what you want to do, use the GNU Lesser General
Public License instead of this License.
"""
LGPL_21 = """                  GNU LESSER GENERAL PUBLIC LICENSE
                       Version 2.1, February 1999
"""
APACHE = """                                 Apache License
                           Version 2.0, January 2004
                        http://www.apache.org/licenses/
"""


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (BSD_3, ["BSD-3-Clause"]),
        (BSD_3.replace("Neither the name", "The name"), ["BSD-2-Clause"]),
        (MIT, ["MIT"]),
        (GPL_3, ["GPL-3.0"]),  # it speaks of the Lesser GPL, and is not that
        (LGPL_21, ["LGPL-2.1"]),
        (APACHE, ["Apache-2.0"]),
        (APACHE + "\n" + MIT, ["Apache-2.0", "MIT"]),
        ("This project bundles code under other terms. " * 10 + APACHE, []),  # far down: a mention
        ("This software is made available under the terms of either of the licenses found in ...", []),
        ("", []),
    ],
)
def test_a_license_is_known_by_its_words(text: str, found: list[str]) -> None:
    assert licenses_in(text) == found


@pytest.mark.parametrize(
    ("name", "is_one"),
    [
        ("LICENSE", True),
        ("LICENSE.txt", True),
        ("LICENCE.md", True),
        ("license-MIT", True),
        ("COPYING", True),
        ("UNLICENSE", True),
        ("README.md", False),
        ("licenses.py", True),
        ("setup.cfg", False),
    ],
)
def test_which_files_are_license_files(name: str, is_one: bool) -> None:
    assert is_license_file(name) is is_one


@given(st.text(max_size=2_000))
def test_reading_any_text_is_total(text: str) -> None:
    assert all(isinstance(spdx, str) for spdx in licenses_in(text))
    assert isinstance(is_license_file(text), bool)


def test_reading_is_linear_in_the_text() -> None:
    assert growth(lambda n: licenses_in("redistribution and use " * n), 2_000) < LINEAR_BOUND
    assert growth(lambda n: is_license_file("license" * n), 2_000) < LINEAR_BOUND


async def test_read_file_says_which_license_a_license_file_is_and_nothing_of_other_files(
    tmp_path: Path,
) -> None:
    (tmp_path / "LICENSE.txt").write_text(BSD_3)
    (tmp_path / "NOTES.md").write_text(BSD_3)
    [read] = [t for t in default_tools(tmp_path, compact=True) if t.name == "read_file"]
    licensed = await read.execute({"path": "LICENSE.txt"}, ToolContext("c1", "read_file"))
    assert str(licensed).startswith("[this is the text of the BSD-3-Clause license]\n")
    assert "Neither the name" in str(licensed)
    assert "BSD-3-Clause" not in str(await read.execute({"path": "NOTES.md"}, ToolContext("c1", "read_file")))
    # a name that means the file ("LICENSE" for LICENSE.txt) reads it the same way
    assert "BSD-3-Clause license" in str(
        await read.execute({"path": "LICENSE"}, ToolContext("c1", "read_file"))
    )
