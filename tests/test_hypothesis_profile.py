"""Property tests take their number of examples from the hypothesis profile (tests/conftest.py), so the
normal suite stays quick on CI and ``HYPOTHESIS_PROFILE=slow`` runs every one of them longer.

A test may ask for fewer examples (each one is costly); asking for more than the profile's default pins it
above the profile in the normal suite and below it in the slow one, and needs its reason written beside it.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import settings

TESTS = Path(__file__).parent
PINNED = re.compile(r"max_examples\s*=\s*(\d+)")
REASON = "# more examples:"


def test_no_property_test_pins_more_examples_than_the_profile_without_saying_why() -> None:
    default = settings.get_profile("default").max_examples
    pinned = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == "conftest.py":
            continue  # where the profiles are registered
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            match = PINNED.search(line)
            if match is None or int(match.group(1)) <= default:
                continue
            if REASON not in line and REASON not in lines[number - 2]:
                pinned.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert not pinned, "pinned above the profile, with no '# more examples: why' beside it:\n" + "\n".join(
        pinned
    )
