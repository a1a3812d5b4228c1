"""bench/bfcl_score.py: the sample, decoding, the verdict glue around bfcl-eval's checker (a recording stand-in
here: the package is not needed), and the report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ._bench import load

score = load("bfcl_score")

TOOL = {
    "type": "function",
    "function": {
        "name": "math_factorial",
        "description": "Calculate the factorial of a given number. Note that the provided function is in Python 3 syntax.",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        },
    },
}
FUNCTION = {
    "name": "math.factorial",
    "description": "Calculate the factorial of a given number.",
    "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}}, "required": ["number"]},
}


def entry(category: str = "simple_python", id: str = "e0", *, messages: Any = None) -> Any:
    asked = messages or ({"role": "user", "content": "What is 5 factorial?"},)
    answer = None if category in score.IRRELEVANCE else ({"math.factorial": {"number": [5]}},)
    return score.Entry(id, category, tuple(asked), (FUNCTION,), (TOOL,), answer)


class Checker:
    """Records what the scoring asks of the package; answers as told."""

    def __init__(
        self, verdict: dict[str, Any] | None = None, *, empty: bool = False, well_formed: bool = True
    ):
        self.verdict = verdict or {"valid": True}
        self.empty, self.formed = empty, well_formed
        self.asked: list[tuple[Any, ...]] = []

    def ast(self, functions: Any, calls: Any, answer: Any, category: str) -> dict[str, Any]:
        self.asked.append((functions, calls, answer, category))
        calls[0].clear()  # the real checker may change what it is given: the reply must not see it
        return self.verdict

    def well_formed(self, calls: Any) -> bool:
        return self.formed

    def is_empty(self, calls: Any) -> bool:
        return self.empty


# -- sampling ---------------------------------------------------------------------------------------------


@given(st.integers(0, 60), st.integers(0, 80), st.integers(0, 2**32))
def test_a_sample_is_the_same_for_a_seed_and_keeps_file_order(size: int, n: int, seed: int) -> None:
    entries = [entry(id=f"e{i}") for i in range(size)]
    drawn = score.sample(entries, n, seed)
    assert drawn == score.sample(entries, n, seed)
    assert len(drawn) == min(n, size)
    positions = [entries.index(e) for e in drawn]
    assert positions == sorted(set(positions))


def test_each_category_draws_with_a_seed_of_its_own() -> None:
    simple = [entry("simple_python", f"s{i}") for i in range(100)]
    multiple = [entry("multiple", f"s{i}") for i in range(100)]
    ids = lambda entries: [e.id for e in entries]  # noqa: E731
    assert ids(score.sample(simple, 10, 1)) != ids(score.sample(multiple, 10, 1))
    assert ids(score.sample(simple, 10, 1)) != ids(score.sample(simple, 10, 2))


def test_calls_decode_as_bfcls_openai_handler_decodes_them() -> None:
    assert score.decode([("f", '{"a": 1}'), ("g", {"b": [2]})]) == ([{"f": {"a": 1}}, {"g": {"b": [2]}}], "")
    calls, why = score.decode([])
    assert calls is None and "no function call" in why
    calls, why = score.decode([("f", "{'a': ")])
    assert calls is None and "not JSON" in why


# -- the verdict ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", sorted(score.IRRELEVANCE))
def test_irrelevance_passes_without_a_call_and_never_asks_the_ast_checker(category: str) -> None:
    checker = Checker()
    text = score.Reply(text="I cannot do that.", decode_error="the reply holds no function call")
    assert score.judge(entry(category), text, checker) == score.Verdict(True)
    called = score.Reply(calls=[{"math_factorial": {"number": 5}}])
    assert score.judge(entry(category), called, checker).error_type == "irrelevance_error:decoder_success"
    assert score.judge(entry(category), called, Checker(empty=True)).passed  # the package says: empty output
    assert checker.asked == []


def test_an_ast_entry_goes_to_the_checker_with_what_bfcl_checks() -> None:
    checker = Checker()
    reply = score.Reply(calls=[{"math_factorial": {"number": 5}}])
    assert score.judge(entry(), reply, checker).passed
    ((functions, calls, answer, category),) = checker.asked
    assert functions == [FUNCTION] and answer == [{"math.factorial": {"number": [5]}}]
    assert category == "simple_python" and calls == [{}]  # the checker's copy, changed by it
    assert reply.calls == [{"math_factorial": {"number": 5}}]


def test_the_checkers_error_type_is_the_verdicts() -> None:
    wrong = {"valid": False, "error": ["Wrong value"], "error_type": "value_error:others"}
    verdict = score.judge(entry(), score.Reply(calls=[{"math_factorial": {"number": 6}}]), Checker(wrong))
    assert verdict == score.Verdict(False, "value_error:others", "Wrong value")


def test_text_a_failed_request_and_a_malformed_call_fail_before_the_checker() -> None:
    checker = Checker()
    text = score.judge(
        entry(), score.Reply(text="120", decode_error="the reply holds no function call"), checker
    )
    assert text.error_type == "ast_decoder:decoder_failed" and "no function call" in text.error
    failed = score.judge(entry("irrelevance"), score.Reply(error="APIConnectionError: refused"), checker)
    assert failed == score.Verdict(False, "request_failed", "APIConnectionError: refused")
    odd = score.judge(entry(), score.Reply(calls=[{"f": 1}]), Checker(well_formed=False))
    assert odd.error_type == "ast_decoder:decoder_wrong_output_format"
    assert checker.asked == []


# -- the report -------------------------------------------------------------------------------------------


def result(category: str, mode: str, passed: bool, seconds: float) -> Any:
    # A routed step reads 100 prompt tokens from the cache, of 400; a plain one computes all of its 300.
    tokens = (400, 100) if mode == "routed" else (300, 0)
    reply = score.Reply(seconds=seconds, requests=1, prompt_tokens=tokens[0], cached_tokens=tokens[1])
    return score.Result(entry(category), mode, reply, score.Verdict(passed))


def test_the_summary_groups_categories_and_halves() -> None:
    results = [
        result("simple_python", "default", True, 2.0),
        result("irrelevance", "default", False, 4.0),
        result("live_simple", "default", True, 3.0),
        result("live_irrelevance", "default", True, 3.0),
        result("simple_python", "routed", False, 6.0),
        result("irrelevance", "routed", True, 6.0),
        result("live_simple", "routed", False, 6.0),
        result("live_irrelevance", "routed", True, 6.0),
    ]
    summary = score.summarise(results, ["default", "routed"])
    default = summary["default"]
    assert default["categories"]["simple_python"] == score.Tally(1, 1)
    assert default["needs a tool"] == score.Tally(2, 2) and default["irrelevance"] == score.Tally(1, 2)
    assert default["tuning (non-live)"] == score.Tally(1, 2) and default["held out (live)"] == score.Tally(
        2, 2
    )
    assert default["all"] == score.Tally(3, 4) and default["seconds_per_entry"] == 3.0
    shown = score.table(summary)
    assert "| simple_python | 92 | 100% (1/1) | 0% (0/1) |" in shown
    assert "| live_irrelevance | - |" in shown and "multiple |" not in shown.replace("live_multiple", "")
    assert "| time / steadyloop, default |  | 1.00x | 2.00x |" in shown
    # needing a tool: 2.5 s plain, 6 s routed; irrelevance: 3.5 s plain, 6 s routed
    assert "| time / default, needing a tool |  | 1.00x | 2.40x |" in shown
    assert "| time / default, irrelevance |  | 1.00x | 1.71x |" in shown
    assert "| prompt tokens computed per entry |  | 300 | 300 |" in shown


def test_time_against_the_raw_client_where_steadyloops_default_was_not_asked() -> None:
    one = [{"f": {"a": 1}}]

    def answered(id: str, mode: str, calls: Any, seconds: float) -> Any:
        reply = score.Reply(calls=calls, seconds=seconds, requests=1, completion_tokens=10 * len(calls or ()))
        return score.Result(entry("parallel", id), mode, reply, score.Verdict(True))

    results = [
        answered("p0", "raw", one, 2.0),
        answered("p0", "routed", one, 2.5),  # the same call: the step's own cost
        answered("p1", "raw", one, 2.0),
        answered("p1", "routed", one * 3, 9.0),  # three calls where raw wrote one: not alike
        answered("p2", "raw", None, 1.0),
        answered("p2", "routed", None, 4.0),  # no call either way: the texts may be of any length
    ]
    summary = score.summarise(results, ["raw", "routed"])
    assert summary["routed"]["seconds_alike"] == (2.5, 2.0, 1)
    shown = score.table(summary)
    assert "| time / raw openai client |  | 1.00x | 3.10x |" in shown
    assert "| time / raw, same calls written |  | - | 1.25x (1) |" in shown
    assert "| tokens written per entry |  | 7 | 13 |" in shown
    assert "default" not in shown


def test_a_result_is_written_as_json() -> None:
    done = score.Result(
        entry(),
        "raw",
        score.Reply(
            calls=[{"math_factorial": {"number": 5}}],
            seconds=1.234,
            requests=1,
            prompt_tokens=300,
            cached_tokens=120,
            completion_tokens=14,
        ),
        score.Verdict(True),
    )
    assert json.loads(json.dumps(done.as_json())) == {
        "id": "e0",
        "category": "simple_python",
        "mode": "raw",
        "calls": [{"math_factorial": {"number": 5}}],
        "text": "",
        "pass": True,
        "error_type": "",
        "error": "",
        "seconds": 1.23,
        "requests": 1,
        "notices": [],
        "prompt_tokens": 300,
        "cached_tokens": 120,
        "completion_tokens": 14,
    }


def test_categories_take_turns_so_a_run_stopped_early_stays_balanced() -> None:
    drawn = [entry("simple_python", f"s{i}") for i in range(3)] + [
        entry("irrelevance", f"i{i}") for i in range(2)
    ]
    assert [e.id for e in score.interleave(drawn)] == ["s0", "i0", "s1", "i1", "s2"]


def test_an_earlier_runs_results_come_back_as_they_were() -> None:
    entries = [entry(id="e0"), entry("irrelevance", "e1")]
    results = [
        score.Result(
            entries[0],
            "raw",
            score.Reply(calls=[{"f": {"a": 1}}], seconds=2.5, requests=1, prompt_tokens=90, cached_tokens=40),
            score.Verdict(True),
        ),
        score.Result(
            entries[1],
            "routed",
            score.Reply(error="ReadTimeout: slow", seconds=9.0, notices=["tool_gate"]),
            score.Verdict(False, "request_failed", "ReadTimeout: slow"),
        ),
    ]
    document = json.loads(json.dumps({"results": [r.as_json() for r in results]}))
    back = score.restored(entries, document)
    assert set(back) == {("e0", "raw"), ("e1", "routed")}
    assert back[("e0", "raw")] == results[0] and back[("e1", "routed")] == results[1]
    assert score.restored(entries[:1], document).keys() == {("e0", "raw")}  # another sample's are left out


def test_examples_show_one_pass_and_one_fail_per_category_and_way() -> None:
    import io

    wrong = score.Verdict(False, "value_error:others", "Wrong value")
    results = [
        score.Result(entry(id="a"), "raw", score.Reply(calls=[{"f": {"n": 5}}]), score.Verdict(True)),
        score.Result(entry(id="b"), "raw", score.Reply(calls=[{"f": {"n": 6}}]), wrong),
        score.Result(entry(id="c"), "raw", score.Reply(calls=[{"f": {"n": 7}}]), wrong),
        score.Result(
            entry("irrelevance", "d"), "raw", score.Reply(text="No tool fits."), score.Verdict(True)
        ),
    ]
    out = io.StringIO()
    score.show_examples(results, out)
    shown = out.getvalue()
    assert "[pass] raw a:" in shown and "[FAIL] raw b:" in shown and " c:" not in shown
    assert "checker: value_error:others: Wrong value" in shown and '{"f": {"n": 6}}' in shown
    assert "[pass] raw d:" in shown and "text: No tool fits." in shown
