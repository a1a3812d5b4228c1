"""How ``parse_spec`` grows with the document: the same document at n and at 10n entries, side by side.

Every list and table the format has (prompt sections, tools, hooks, overrides, bundled servers, a free-form
``extra_body``) gets n entries; the ratio of the median times at 10n and at n should stay near 10 (linear).
Also times ``json.loads`` of the same document as text, as a baseline for what reading it costs at all.

Run: ``.venv/bin/python bench/spec_parse.py [n] [runs]``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import steadyloop as sl
from steadyloop.spec import SPEC_VERSION


def document(n: int) -> dict[str, Any]:
    return {
        "spec": SPEC_VERSION,
        "prompt": [{"id": f"p{i}", "text": "You help. " * 5} for i in range(n)],
        "model": {"name": "m", "extra_body": {f"k{i}": [i, {"a": "b"}] for i in range(n)}},
        "tools": {"names": [f"t{i}" for i in range(n)]},
        "approvals": {"overrides": {f"t{i}": True for i in range(n)}},
        "hooks": [
            {"id": f"h{i}", "event": "before_turn", "tool": "t", "arguments": {"q": i}} for i in range(n)
        ],
        "bundle": {"mcp_servers": {f"s{i}": {"command": "x", "args": ["a", "b"]} for i in range(n)}},
    }


def _median(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    small, large = document(n), document(10 * n)
    small_text, large_text = json.dumps(small), json.dumps(large)
    rows = []
    for label, doc, text in (("n", small, small_text), ("10n", large, large_text)):
        parse = _median(lambda doc=doc: sl.parse_spec(doc, bundle=True), runs)
        loads = _median(lambda text=text: json.loads(text), runs)
        rows.append((label, parse, loads))
        print(
            f"{label:>4} ({len(text) / 1e6:.1f} MB): parse_spec {parse * 1e3:8.1f} ms   json.loads {loads * 1e3:8.1f} ms"
        )
    print(
        f"growth at 10x the entries: parse_spec x{rows[1][1] / rows[0][1]:.1f}, json.loads x{rows[1][2] / rows[0][2]:.1f}"
    )
    print(
        f"parse_spec / json.loads: {rows[0][1] / rows[0][2]:.1f} at n, {rows[1][1] / rows[1][2]:.1f} at 10n"
    )


if __name__ == "__main__":
    main()
