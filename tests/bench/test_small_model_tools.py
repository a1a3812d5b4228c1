"""bench/small_model_tools.py: its two halves are apart and each covers every category, and a held-out
prompt is answerable: the call it expects, run by the command's own tool on the bench's folder, returns
what the answer check looks for, and the grader tells that call from a wrong one."""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyloop import ToolCall, ToolContext
from steadyloop.cli.tools import default_tools

from ._bench import load

bench = load("small_model_tools")


def test_the_halves_share_no_prompt_and_each_covers_every_category() -> None:
    tuning = {c.prompt for c in bench.CASES}
    held = {c.prompt for c in bench.HELD_OUT}
    assert not tuning & held
    assert all(c.half == "tuning" for c in bench.CASES)
    assert all(c.half == "held-out" for c in bench.HELD_OUT)
    for category in bench.CATEGORIES:
        assert any(c.category == category for c in bench.HELD_OUT), category


# A held-out prompt, the call a right run makes, and the answer written from what the call returned.
_FILE_CASES = [
    ("What time is the team meeting, according to notes.txt?", "read_file", {"path": "notes.txt"}),
    ("What is the first item in todo.txt?", "read_file", {"path": "todo.txt"}),
    ("Which city is written in city.txt?", "read_file", {"path": "city.txt"}),
    ("What number is in price.txt?", "read_file", {"path": "price.txt"}),
    (
        "According to docs/deploy.md, what should the server run behind?",
        "read_file",
        {"path": "docs/deploy.md"},
    ),
    ("Which file mentions the word banana?", "search_text", {"pattern": "banana"}),
    ("Where is the number 9090 mentioned?", "search_text", {"pattern": "9090"}),
    ("Find the file that says something about a lease.", "search_text", {"pattern": "lease"}),
    ("Which file talks about Thursday?", "search_text", {"pattern": "Thursday"}),
    ("What files does the docs directory have?", "list_dir", {"path": "docs"}),
    ("Tell me what is stored in the recipes folder.", "list_dir", {"path": "recipes"}),
    ("Show me everything in the current directory.", "list_dir", {"path": "."}),
]


@pytest.mark.parametrize(("prompt", "name", "arguments"), _FILE_CASES)
async def test_a_held_out_file_prompt_is_answerable_with_the_command_s_tools(
    tmp_path: Path, prompt: str, name: str, arguments: dict[str, str]
) -> None:
    case = next(c for c in bench.HELD_OUT if c.prompt == prompt)
    bench.make_folder(tmp_path)
    tool = {t.name: t for t in default_tools(tmp_path)}[name]
    result = await tool.execute(arguments, ToolContext("c1", name))
    assert isinstance(result, str)
    outcome = bench.Outcome(case, calls=[ToolCall("c1", name, arguments)], answer=result)
    bench.grade(outcome, tmp_path)
    assert outcome.correct, (result, outcome)
    # the same answer after the wrong tool is not a right run
    wrong = "write_file" if name != "write_file" else "read_file"
    outcome = bench.Outcome(case, calls=[ToolCall("c1", wrong, arguments)], answer=result)
    bench.grade(outcome, tmp_path)
    assert not outcome.correct


def test_a_held_out_custom_prompt_is_graded_on_its_arguments(tmp_path: Path) -> None:
    case = next(c for c in bench.HELD_OUT if c.prompt == "How much is 40 euros in US dollars?")
    right = ToolCall("c1", "convert_currency", {"amount": 40, "source": "EUR", "target": "USD"})
    reversed_ = ToolCall("c1", "convert_currency", {"amount": 40, "source": "USD", "target": "EUR"})
    outcome = bench.Outcome(case, calls=[right], answer="40 euros are 43.60 US dollars.")
    bench.grade(outcome, tmp_path)
    assert outcome.correct
    outcome = bench.Outcome(case, calls=[reversed_], answer="40 euros are 43.60 US dollars.")
    bench.grade(outcome, tmp_path)
    assert outcome.selection and not outcome.arguments and not outcome.correct


def test_a_held_out_no_tool_prompt_is_wrong_once_a_tool_is_called(tmp_path: Path) -> None:
    case = next(c for c in bench.HELD_OUT if c.prompt == "Translate 'thank you' into French.")
    outcome = bench.Outcome(case, answer="Merci.")
    bench.grade(outcome, tmp_path)
    assert outcome.correct
    outcome = bench.Outcome(case, calls=[ToolCall("c1", "read_file", {"path": "x"})], answer="Merci.")
    bench.grade(outcome, tmp_path)
    assert not outcome.correct


def test_the_bench_routes_as_the_command_does_over_its_folder(tmp_path: Path) -> None:
    """The command's routing is built over the bench's folder (paths named in words or by a definition);
    any other policy is left as it is."""
    import steadyloop as sl

    bench.make_folder(tmp_path)
    policy = sl.LoopPolicy(**bench.policy_fields("on", "on"))
    routed = bench.with_host_paths(policy, tmp_path)
    hook = routed.tool_routing.named_in_files
    assert policy.tool_routing.named_in_files is None and hook is not None
    assert hook("What is in this folder?") == ["./"]  # a folder, written with a trailing slash
    plain = sl.LoopPolicy(**bench.policy_fields("off"))
    assert bench.with_host_paths(plain, tmp_path) is plain
