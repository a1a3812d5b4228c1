"""Every test here starts from the bundled defaults, whatever the developer's shell exports."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _bundled_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEADYLOOP_LOCAL_MODEL", raising=False)
