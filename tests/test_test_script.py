"""scripts/test names test paths for its second pass (the other transport): each must exist, or pytest
collects nothing there and the pass fails on a fresh clone after a file moves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_path_the_test_script_names_exists() -> None:
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    named = re.findall(r"(?<![\w/.])tests/[\w/.]*", script)
    assert named, "scripts/test names no test path"
    missing = [path for path in named if not (ROOT / path).exists()]
    assert missing == []
