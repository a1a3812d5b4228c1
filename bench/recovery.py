"""``recover_tool_calls`` over adversarial text: milliseconds per 100 KB, against a linear floor.

Recovery runs on the event loop for every reply that might hold a call written as text, so a reply shaped
to make it slow (an opener repeated ten thousand times, a header that never closes, a run of ``to=``,
brackets nested thousands deep, a fence around nothing but spaces) stalls every other run in the process.
Each shape is built at the given size and read several times; the floor is one regular-expression pass
over the same text in the same process (every character a call spelling can start with, found once), so
the ratio says how far recovery is from reading the text once, whatever the machine.

Each shape runs in a child process with a time limit, so a shape that has gone quadratic reports as over
the limit instead of holding the whole run up.

Run: ``.venv/bin/python bench/recovery.py [--kb 100] [--timeout 20] [--repeat 5]``. Target: every shape
under 50 ms per 100 KB.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

TOOLS = ["get_weather", "search", "write_file"]

_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
_PROSE = "The weather in Paris is mild today, with light wind from the west and a chance of rain. "


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


# Each shape: a function of the size in characters that returns the text.
SHAPES: dict[str, Callable[[int], str]] = {
    "plain prose": lambda n: _repeat(_PROSE, n),
    "prose with brackets": lambda n: _repeat("See [1], {x} and `y` <b>here</b>. ", n),
    "valid calls": lambda n: _repeat(_CALL, n),
    "one huge argument": lambda n: (
        '<tool_call>{"name": "write_file", "arguments": {"content": "' + "x" * n + '"}}</tool_call>'
    ),
    "huge almost-JSON": lambda n: (
        "<tool_call>{'name': 'write_file', 'arguments': {'content': '" + "it's " * (n // 5) + "'}}"
    ),
    "many almost-JSON calls": lambda n: _repeat(
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': 3,}}</tool_call>", n
    ),
    "<tool_call> repeated": lambda n: _repeat("<tool_call>", n),
    "<function= repeated": lambda n: _repeat("<function=", n),
    "unclosed function header": lambda n: "<tool_call><function=" + "a" * n,
    "<parameter= repeated": lambda n: "<tool_call><function=f>" + _repeat("<parameter=", n),
    "[TOOL_CALLS] repeated": lambda n: _repeat("[TOOL_CALLS]", n),
    "[TOOL_CALLS] unclosed": lambda n: _repeat("[TOOL_CALLS][{", n),
    "<|python_start|> repeated": lambda n: _repeat("<|python_start|>", n),
    "<|python_tag|> repeated": lambda n: _repeat("<|python_tag|>{", n),
    "to= run": lambda n: "<|message|>" + _repeat("to=", n),
    "harmony headers unclosed": lambda n: _repeat("<|channel|>commentary to=", n),
    "harmony analysis unclosed": lambda n: _repeat("<|channel|>analysis<|message|>x", n) + "</think>",
    "harmony messages": lambda n: _repeat(
        '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"P"}<|call|>',
        n,
    ),
    "special-token markers": lambda n: _repeat('<|function_call|>{"name": "search", "arguments": {', n),
    "wrapper tags": lambda n: _repeat("<response><function_call><TOOLCALL>[", n),
    "fence of spaces": lambda n: "```\n" + " " * n,
    "fences repeated": lambda n: _repeat("```json\n{", n),
    "deep [": lambda n: "[" * n,
    "deep {": lambda n: "{" * n,
    "deep {'a':": lambda n: _repeat("{'a':", n),
    "deep in <tool_call>": lambda n: "<tool_call>" + "[" * n,
    "deep in <parameter>": lambda n: "<tool_call><function=f><parameter=p>" + "{" * n,
    "deep after [TOOL_CALLS]": lambda n: "[TOOL_CALLS]" + "[" * n,
    "pythonic list": lambda n: "[" + _repeat("get_weather(city='Paris'), ", n - 2) + "]",
}

_FLOOR = re.compile(r"[<\[{`]")


def _floor(text: str) -> int:
    return len(_FLOOR.findall(text))


def _time(action: Callable[[], object], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def measure(shape: str, size: int, repeat: int) -> dict[str, Any]:
    """Milliseconds to recover from one text of this shape, and for the floor over the same text."""
    from steadyloop.tools.recovery import recover_tool_calls

    text = SHAPES[shape](size)
    try:
        recover_tool_calls(text, TOOLS)
    except Exception as error:  # the bench reports what escaped rather than stopping
        return {"chars": len(text), "error": type(error).__name__}
    return {
        "chars": len(text),
        "seconds": _time(lambda: recover_tool_calls(text, TOOLS), repeat),
        "floor": _time(lambda: _floor(text), repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, default=100, help="size of each text in KB (default 100)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds allowed per shape")
    parser.add_argument("--repeat", type=int, default=5, help="reads per shape; the median is kept")
    parser.add_argument("--shape", help=argparse.SUPPRESS)  # one shape, in the child process
    args = parser.parse_args()
    size = args.kb * 1000
    if args.shape:
        print(json.dumps(measure(args.shape, size, args.repeat)))
        return
    per = 100_000
    print(f"recover_tool_calls, {args.kb} KB per text, median of {args.repeat}; ms per 100 KB")
    print(f"{'shape':28} {'recovery':>10} {'floor':>8} {'ratio':>8}")
    worst = 0.0
    for shape in SHAPES:
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--shape",
                    shape,
                    "--kb",
                    str(args.kb),
                    "--repeat",
                    str(args.repeat),
                ],
                capture_output=True,
                text=True,
                timeout=args.timeout,
                check=True,
            )
        except subprocess.TimeoutExpired:
            print(f"{shape:28} {'> ' + str(int(args.timeout * 1000 * per / size)):>10}")
            worst = float("inf")
            continue
        result = json.loads(done.stdout)
        if "error" in result:
            print(f"{shape:28} {'raised ' + result['error']:>10}")
            worst = float("inf")
            continue
        scale = per / result["chars"] * 1000
        ms, floor = result["seconds"] * scale, result["floor"] * scale
        worst = max(worst, ms)
        print(f"{shape:28} {ms:10.2f} {floor:8.3f} {ms / floor if floor else 0:7.0f}x")
    print(f"worst: {worst:.2f} ms per 100 KB (target < 50)")


if __name__ == "__main__":
    main()
