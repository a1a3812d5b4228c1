"""Which license a license file's text is, by the words each license is written in; sans I/O.

Asked "What license does this project use?", the 1.5B model read flask's LICENSE.txt (the BSD 3-Clause
text, which never names itself) and answered "MIT". The command's ``read_file`` says, above the text of a
file named like a license (LICENSE, LICENCE, COPYING, with any extension), which license it is, by its
SPDX identifier, as a forge shows it beside a repository. Only whole phrases each license is written in
count, and a text that holds none says nothing.
"""

from __future__ import annotations

import re

__all__ = ["is_license_file", "licenses_in"]

_LICENSE_FILE = re.compile(r"(?:un)?licen[cs]e|copying|copyright", re.IGNORECASE)

# (SPDX identifier, words of its title, words of its text), the more particular first. A title is looked
# for at the top only: the GPL's text speaks of the Lesser GPL, the MPL's of both. Clauses anywhere: a
# copyright line comes before them, and a BSD 3-Clause text holds the 2-Clause's words.
_TEXTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("LGPL-3.0", ("gnu lesser general public license", "version 3"), ()),
    ("LGPL-2.1", ("gnu lesser general public license", "version 2.1"), ()),
    ("LGPL-2.0", ("gnu library general public license", "version 2"), ()),
    ("AGPL-3.0", ("gnu affero general public license", "version 3"), ()),
    ("GPL-3.0", ("gnu general public license", "version 3"), ()),
    ("GPL-2.0", ("gnu general public license", "version 2"), ()),
    ("Apache-2.0", ("apache license", "version 2.0"), ()),
    ("MPL-2.0", ("mozilla public license", "2.0"), ()),
    ("BSD-4-Clause", (), ("redistribution and use in source and binary forms", "all advertising materials")),
    ("BSD-3-Clause", (), ("redistribution and use in source and binary forms", "neither the name")),
    ("BSD-2-Clause", (), ("redistribution and use in source and binary forms",)),
    ("MIT", (), ("permission is hereby granted, free of charge, to any person obtaining a copy",)),
    ("ISC", (), ("permission to use, copy, modify, and/or distribute this software for any purpose",)),
    ("Unlicense", (), ("this is free and unencumbered software released into the public domain",)),
    ("PSF-2.0", (), ("python software foundation license",)),
)
_TITLE = 400  # of the text, the characters a title is looked for in
#: Of a file, the characters looked at: every license's words are in its first pages.
_HEAD = 64_000


def is_license_file(name: str) -> bool:
    """Whether a file's name (without its folder) is a license file's: LICENSE, LICENCE.txt, COPYING."""
    stem = name.rsplit("/", 1)[-1].split(".", 1)[0].replace("-", "").replace("_", "")
    return _LICENSE_FILE.fullmatch(stem) is not None or stem.lower().startswith("license")


def licenses_in(text: str) -> list[str]:
    """The SPDX identifiers of the licenses ``text`` is written in, most particular first, one of each
    family (an LGPL text is not also called GPL). Linear in the text."""
    words = " ".join(text[:_HEAD].split()).lower()
    title = words[:_TITLE]
    found: list[str] = []
    for spdx, named, clauses in _TEXTS:
        if _family(spdx) in map(_family, found):
            continue
        if all(w in title for w in named) and all(w in words for w in clauses):
            found.append(spdx)
    return found


def _family(spdx: str) -> str:
    return "GPL" if "GPL" in spdx else spdx.split("-")[0]
