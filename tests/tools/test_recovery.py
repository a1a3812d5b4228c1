"""recover_tool_calls against real model outputs and the rules around them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.arguments import REPAIR_OVERHEAD
from steadyloop.tools._call_text import MAX_BLOCKS, REPAIR_BUDGET
from steadyloop.tools.recovery import RecoveredCalls, recover_tool_calls

_SAMPLES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent.parent / "data" / "tool_call_samples.json").read_text(encoding="utf-8")
)["samples"]


@pytest.mark.parametrize("sample", _SAMPLES, ids=[f"{i}-{s['format']}" for i, s in enumerate(_SAMPLES)])
def test_real_model_outputs(sample: dict[str, Any]) -> None:
    result = recover_tool_calls(sample["text"], sample["tool_names"])
    assert [{"name": c.name, "arguments": c.arguments} for c in result.calls] == sample["calls"]
    assert [c.id for c in result.calls] == [f"call_recovered_{i}" for i in range(len(sample["calls"]))]
    if "content" in sample:
        assert result.content == sample["content"]


def test_the_samples_cover_every_format_and_some_negatives() -> None:
    formats = {s["format"] for s in _SAMPLES if s["calls"]}
    assert {
        "hermes",
        "qwen3_coder",
        "mistral",
        "mistral_v11",
        "mistral_args",
        "llama_python_tag",
        "json",
    } <= formats
    assert {"pythonic", "harmony", "fenced_json"} <= formats
    assert {"nemotron", "gigachat3", "inkling", "hermes_wrapped", "command_r_plus"} <= formats
    assert sum(1 for s in _SAMPLES if not s["calls"]) >= 15


TOOLS = ["get_weather", "search"]


@pytest.mark.parametrize(
    "text",
    [
        "I would call get_weather with city Paris.",
        "You can use get_weather(city='Paris') to find out.",
        'The tool get_weather takes {"city": ...}, but I don\'t need it.',
        'The call would be {"name": "get_weather", "arguments": {"city": "Paris"}} if you want.',
        "Here is the data: [1, 2, 3] and {'a': 1}",
        '{"name": "Paris", "country": "France"}',
        '{"name": "get_weather"}',
        "[get_weather]",
        "```python\nget_weather(city='Paris')\n```",
        "`get_weather` is the tool for that.",
    ],
)
def test_prose_that_mentions_a_tool_is_not_a_call(text: str) -> None:
    assert recover_tool_calls(text, TOOLS) == RecoveredCalls([], text.strip())


def test_untagged_calls_must_name_existing_tools() -> None:
    text = '{"name": "delete_everything", "arguments": {}}'
    assert recover_tool_calls(text, TOOLS).calls == []
    assert recover_tool_calls("[delete_everything(force=True)]", TOOLS).calls == []
    mixed = '[{"name": "get_weather", "arguments": {}}, {"name": "delete_everything", "arguments": {}}]'
    assert recover_tool_calls(mixed, TOOLS).calls == []


def test_a_list_of_json_calls_is_recovered() -> None:
    text = (
        '[{"name": "get_weather", "arguments": {"city": "Paris"}},'
        ' {"name": "search", "parameters": {"q": "x"}}]'
    )
    result = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris"}),
        ("search", {"q": "x"}),
    ]


_FENCED = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'


def test_a_fenced_call_is_a_call_when_it_is_the_whole_reply() -> None:
    result = recover_tool_calls(f"\n  {_FENCED}\n", TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert result.content == ""


@pytest.mark.parametrize(
    "text",
    [
        f"Let me look.\n{_FENCED}\nOne moment.",
        f"Sure!\n{_FENCED}",  # a lead-in is words around the JSON: "fences and whitespace aside" it is not
        f"{_FENCED}\nThat is the call I would make.",
        'This is not a tool call: {"name": "get_weather", "arguments": {"city": "Paris"}}',
        'Here is the result: {"name": "get_weather", "arguments": {}} Would you like to know more?',
        '{"name": "get_weather", "arguments": {}} Would you like to know more? {"a": 1}',
        "{'name': 'get_weather', 'arguments': {}} is what I would send]",
    ],
)
def test_json_with_words_around_it_is_an_example_not_a_call(text: str) -> None:
    assert recover_tool_calls(text, TOOLS) == RecoveredCalls([], text.strip())


def test_command_r_plus_writes_its_plan_then_action_and_the_fenced_calls() -> None:
    text = (
        "I will look up the weather first.\nAction: ```json\n"
        '[{"tool_name": "get_weather", "parameters": {"city": "Paris"}}]\n```'
    )
    result = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert result.content == "I will look up the weather first."


def test_two_fenced_calls_are_not_recovered() -> None:
    fence = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    assert recover_tool_calls(f"{fence}\nor\n{fence}", TOOLS).calls == []


def test_untagged_almost_json_is_repaired() -> None:
    result = recover_tool_calls(
        "{'name': 'get_weather', 'arguments': {'city': 'Paris', 'metric': None}}", TOOLS
    )
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris", "metric": None})
    ]


def test_untagged_call_with_unreadable_arguments_is_not_a_call() -> None:
    assert recover_tool_calls('{"name": "get_weather", "arguments": "Paris please"}', TOOLS).calls == []


def test_tagged_call_with_unreadable_arguments_keeps_the_text() -> None:
    result = recover_tool_calls(
        '<tool_call>{"name": "get_weather", "arguments": "Paris please"}</tool_call>', TOOLS
    )
    assert len(result.calls) == 1
    call = result.calls[0]
    assert (call.name, call.arguments, call.raw_arguments) == ("get_weather", {}, "Paris please")


def test_tagged_block_that_is_not_json_still_names_its_tool() -> None:
    result = recover_tool_calls(
        '<tool_call>{"name": "get_weather", "arguments": {city: Paris</tool_call>', TOOLS
    )
    assert [c.name for c in result.calls] == ["get_weather"]


def test_arguments_text_is_kept_where_the_format_delimits_it() -> None:
    result = recover_tool_calls('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', TOOLS)
    assert result.calls[0].raw_arguments == '{"city": "Paris"}'


@pytest.mark.parametrize("closer", ["</think>", "</thinking>", "</reasoning>", "◁/think▷", "[/THINK]"])
def test_only_the_text_after_thinking_is_read(closer: str) -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'
    text = f"Maybe {call} would help{closer}Sure."
    assert recover_tool_calls(text, TOOLS).calls == []
    result = recover_tool_calls(f"Maybe {call}{closer}{call}", TOOLS)
    assert len(result.calls) == 1
    assert result.content == f"Maybe {call}{closer}"


def test_harmony_analysis_is_not_read() -> None:
    text = (
        "<|channel|>analysis<|message|>I could send "
        '<tool_call>{"name": "search", "arguments": {}}</tool_call>'
        "<|end|><|start|>assistant<|channel|>final<|message|>Done."
    )
    assert recover_tool_calls(text, TOOLS).calls == []


def test_harmony_call_served_raw() -> None:
    text = (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city":"Paris"}<|call|>'
    )
    result = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": "Paris"})]
    assert result.content == ""


def test_plain_text_is_returned_trimmed_without_work() -> None:
    assert recover_tool_calls("  just words  ", TOOLS) == RecoveredCalls([], "just words")
    assert recover_tool_calls("", TOOLS) == RecoveredCalls([], "")


def test_python_list_with_positional_or_non_literal_arguments_is_not_a_call() -> None:
    assert recover_tool_calls("[get_weather('Paris')]", TOOLS).calls == []
    assert recover_tool_calls("[get_weather(city=os.environ['HOME'])]", TOOLS).calls == []
    assert recover_tool_calls("[get_weather(city=1e999)]", TOOLS).calls == []


# Properties ---------------------------------------------------------------------------------------------

_prose = st.text(alphabet=st.characters(blacklist_characters="<[{`"), max_size=60)
_args = st.dictionaries(
    st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    st.text(max_size=20) | st.integers() | st.booleans(),
    max_size=3,
)


def _tagged(name: str, args: dict[str, Any], form: int) -> str:
    dumped = json.dumps(args)
    return [
        f'<tool_call>{{"name": "{name}", "arguments": {dumped}}}</tool_call>',
        f'[TOOL_CALLS][{{"name": "{name}", "arguments": {dumped}}}]',
        f"[TOOL_CALLS]{name}[ARGS]{dumped}",
        f'<|python_tag|>{{"name": "{name}", "parameters": {dumped}}}<|eom_id|>',
        f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json"
        f"<|message|>{dumped}<|call|>",
    ][form]


_TAGS = ("<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<|call|>", "<|message|>")


@given(_prose, st.sampled_from(TOOLS), _args, st.integers(0, 4))
def test_a_tagged_call_is_found_and_its_tag_leaves_the_content(
    before: str, name: str, args: dict[str, Any], form: int
) -> None:
    result = recover_tool_calls(before + _tagged(name, args, form), TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [(name, args)]
    assert not any(tag in result.content for tag in _TAGS)
    assert result.content == before.strip()


@given(st.lists(st.tuples(st.sampled_from(TOOLS), _args), min_size=1, max_size=4), _prose)
def test_several_hermes_calls_keep_their_order(calls: list[tuple[str, dict[str, Any]]], after: str) -> None:
    text = "".join(_tagged(name, args, 0) for name, args in calls) + after
    result = recover_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == calls
    assert [c.id for c in result.calls] == [f"call_recovered_{i}" for i in range(len(calls))]
    assert result.content == after.strip()


# Words (prose without any spelling's markers, holding at least one letter or digit) around JSON.
_words = st.text(st.characters(blacklist_characters="`<[|", blacklist_categories=["Cs"]), max_size=30).filter(
    lambda text: any(ch.isalnum() for ch in text) and "Action:" not in text and "function call" not in text
)
_ENVELOPES = ("arguments", "parameters")
# Argument text without a closing thinking tag: recovery reads after the last one, wherever it stands.
_call_args = st.dictionaries(
    st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    st.text(st.characters(blacklist_characters="<[◁"), max_size=20) | st.integers() | st.booleans(),
    max_size=3,
)


@st.composite
def _json_call(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """A call written as JSON, bare or fenced, one or a list, clean or almost-JSON: (text, name, args)."""
    name, args = draw(st.sampled_from(TOOLS)), draw(_call_args)
    call = {"name": name, draw(st.sampled_from(_ENVELOPES)): args}
    body = draw(
        st.sampled_from([json.dumps(call), json.dumps([call]), repr(call), json.dumps(call, indent=2)])
    )
    fence = draw(st.sampled_from(["", "```\n", "```json\n"]))
    return (f"{fence}{body}\n```" if fence else body), name, args


@given(_words | st.just(""), _json_call(), _words | st.just(""))
def test_json_inside_words_is_never_a_call(
    before: str, call: tuple[str, str, dict[str, Any]], after: str
) -> None:
    if not (before + after).strip():
        return  # nothing around it: that is the whole reply, a call (the test below)
    text = before + call[0] + after
    assert recover_tool_calls(text, TOOLS) == RecoveredCalls([], text.strip())


@given(st.sampled_from(["", " ", "\n", "\n\n  "]), _json_call(), st.sampled_from(["", "\n", " \n"]))
def test_json_that_is_the_whole_reply_is_the_call(
    before: str, call: tuple[str, str, dict[str, Any]], after: str
) -> None:
    text, name, args = call
    result = recover_tool_calls(before + text + after, TOOLS)
    assert [(c.name, c.arguments) for c in result.calls] == [(name, args)]
    assert result.content == ""


@given(st.text(max_size=200))
def test_prose_without_call_marks_is_never_a_call(text: str) -> None:
    cleaned = "".join(ch for ch in text if ch not in "<[{`")
    assert recover_tool_calls(cleaned + " get_weather search", TOOLS).calls == []


@given(st.text(max_size=120))
def test_any_text_is_handled(text: str) -> None:
    result = recover_tool_calls(text, TOOLS)
    assert isinstance(result.content, str)
    for call in result.calls:
        assert isinstance(call.arguments, dict)


# Declared names only ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
        '<|channel|>commentary to=container.exec <|constrain|>json<|message|>{"cmd": ["ls"]}<|call|>',
        "<|start|>assistant<|channel|>commentary to=assistant<|message|>Checking now.<|end|>",
        '<|channel|>commentary to=browser.search <|message|>{"query": "x"}<|call|>',
        '[TOOL_CALLS][{"name": "delete_everything", "arguments": {}}]',
        "[TOOL_CALLS]delete_everything[ARGS]{}",
        '<|python_tag|>{"name": "delete_everything", "parameters": {}}',
        "<tool_call><function=delete_everything><parameter=x>1</parameter></function></tool_call>",
        "<|python_start|>[delete_everything(force=True)]<|python_end|>",
        '<TOOLCALL>[{"name": "delete_everything", "arguments": {}}]</TOOLCALL>',
    ],
)
def test_a_call_to_a_tool_nobody_declared_is_not_a_call(text: str) -> None:
    assert recover_tool_calls(text, TOOLS).calls == []


def test_an_echoed_tool_definition_is_not_a_call() -> None:
    echoed = (
        '<response>[{"type": "function", "function": {"name": "get_weather", "description": "Weather",'
        ' "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]</response>'
    )
    assert recover_tool_calls(echoed, TOOLS).calls == []


@pytest.mark.parametrize(
    "text",
    [
        'Calls look like <tool_call>{"name": ...}</tool_call> in general.',
        'An example: ```json\n{"name": "weather", "arguments": {}}\n```',
        "<response>The weather is fine.</response>",
        'Use Action: with a list like [{"tool_name": "get_weather"}].',
    ],
)
def test_prose_that_only_shows_json_or_tags_is_not_a_call(text: str) -> None:
    assert recover_tool_calls(text, TOOLS).calls == []


# Hostile input: total, and bounded ---------------------------------------------------------------------

_DEEP = ["[" * 1000, "{" * 600, "{'a':" * 300]
_WRAPPERS = [
    "{}",
    "<tool_call>{}</tool_call>",
    "<tool_call>{}",
    "<tool_call><function=get_weather><parameter=p>{}</parameter></function></tool_call>",
    "[TOOL_CALLS]{}",
    "[TOOL_CALLS]get_weather[ARGS]{}",
    "<|python_tag|>{}",
    "<|python_start|>{}<|python_end|>",
    "```json\n{}\n```",
    "<|function_call|>{}",
    "<TOOLCALL>{}</TOOLCALL>",
    '<tool_call>{{"name": "get_weather", "arguments": {}}}</tool_call>',
]


@pytest.mark.parametrize("deep", _DEEP)
@pytest.mark.parametrize("wrapper", _WRAPPERS)
def test_deep_nesting_anywhere_never_raises(deep: str, wrapper: str) -> None:
    result = recover_tool_calls(wrapper.format(deep), TOOLS)
    assert all(call.name in TOOLS for call in result.calls)


def test_the_repairer_reads_a_bounded_amount_of_any_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    # The repairer is the one reader that costs a microsecond a character; whatever the reply, recovery
    # hands it a bounded amount, so hostile replies cost a bounded time on the event loop.
    from steadyloop import arguments

    read: list[int] = []
    real = arguments.repair_json

    def counting(text: str, **options: Any) -> Any:
        read.append(len(text))
        return real(text, **options)

    monkeypatch.setattr(arguments, "repair_json", counting)
    shapes = [
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris',}}</tool_call>" * 800,
        "[TOOL_CALLS][{" * 5000,
        "<|python_tag|>{" * 5000,
        '<|function_call|>{"name": "search", "arguments": {' * 2000,
        "<tool_call>{'name': 'get_weather', 'arguments': {'content': '" + "it's " * 20000 + "'}}",
    ]
    for text in shapes:
        read.clear()
        recover_tool_calls(text, TOOLS)
        assert sum(read) + REPAIR_OVERHEAD * len(read) <= REPAIR_BUDGET


def test_at_most_a_bounded_number_of_blocks_is_read() -> None:
    call = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
    result = recover_tool_calls(call * (MAX_BLOCKS + 50), TOOLS)
    assert len(result.calls) == MAX_BLOCKS


# The shared marker spellings, and the single characters that most often break a parse when spliced in.
_MARKS = st.sampled_from(
    json.loads((Path(__file__).parent.parent / "data" / "tool_call_markers.json").read_text())["markers"]
    + ["[", "{", "]", "}", '"', "'", ",", ";"]
)


@given(st.lists(_MARKS | st.text(max_size=8), max_size=30))
def test_any_mix_of_call_spellings_is_handled(parts: list[str]) -> None:
    text = "".join(parts)
    result = recover_tool_calls(text, TOOLS)
    assert isinstance(result.content, str)
    assert [c.id for c in result.calls] == [f"call_recovered_{i}" for i in range(len(result.calls))]
    for call in result.calls:
        assert call.name in TOOLS
        assert isinstance(call.arguments, dict)
    if not result.calls:
        assert result.content == text.strip()
