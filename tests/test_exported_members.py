"""The package root re-exports the public API: complete, sorted, and the names API.md promises."""

from __future__ import annotations

import importlib
import subprocess
import sys

import steadyloop as sl
from steadyloop.turn import Split

PROMISED = [
    "ToolCall", "Usage", "Turn", "DEFAULT_FENCES", "ALL_FENCES", "FenceSplitter", "strip_thinking",
    "parse_tool_arguments", "ToolArgumentsError", "recover_tool_calls", "sanitize_tools", "relax_tools",
    "classify_failure", "run_turn", "run_agent_loop", "Agent", "SteadyloopError", "ContextOverflow",
    "EndpointSilent",
]  # fmt: skip


def test_all_is_sorted_and_every_name_exists() -> None:
    constants = [n for n in sl.__all__ if n.isupper() or n.startswith("__")]
    rest = [n for n in sl.__all__ if n not in constants]
    assert rest == sorted(rest, key=lambda n: (n[0].islower(), n))
    assert len(set(sl.__all__)) == len(sl.__all__)
    for name in sl.__all__:
        assert hasattr(sl, name), name


def test_every_public_name_at_the_root_is_in_all() -> None:
    public = {n for n, v in vars(sl).items() if not n.startswith("_") and not isinstance(v, type(sl))}
    assert public <= set(sl.__all__)


def test_the_names_other_code_relies_on() -> None:
    for name in PROMISED:
        assert name in sl.__all__, name
    assert issubclass(sl.ContextOverflow, sl.SteadyloopError) and issubclass(
        sl.EndpointSilent, sl.SteadyloopError
    )
    assert issubclass(sl.ToolArgumentsError, sl.SteadyloopError)
    assert {"content", "reasoning"} <= set(Split.__dataclass_fields__)


def test_importing_does_no_io_and_pulls_no_optional_extra() -> None:
    code = "import sys, steadyloop; print(','.join(m for m in ('mcp', 'uvicorn', 'starlette', 'opentelemetry') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "" and out.stderr == ""


def test_every_module_imports() -> None:
    for name in ("steadyloop.testing.server", "steadyloop.local", "steadyloop.tools.mcp"):
        importlib.import_module(name)
