"""Which lines of a search define the name searched for: shown first when a search finds more than fits."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.definitions import DEFINES_MATCH, DEFINES_OTHER, NOT_DEFINITION, definition_rank

from ..edges._edges import LINEAR_BOUND, growth


@pytest.mark.parametrize(
    ("line", "pattern", "rank"),
    [
        ("def echo(message=None):", "echo", DEFINES_MATCH),
        ("    async def echo(self):", "echo", DEFINES_MATCH),
        ("class Context:", "Context", DEFINES_MATCH),
        ("class Context:", "class Context", DEFINES_MATCH),
        ("export default function render(el) {", "render", DEFINES_MATCH),
        ("export const API_URL = 'x'", "api_url", DEFINES_MATCH),
        ("pub(crate) fn parse_args(", "parse_args", DEFINES_MATCH),
        ("func (c *Client) Do(req *Request) {", "Do", DEFINES_MATCH),
        ("type Options struct {", "Options", DEFINES_MATCH),
        ("def echo_via_pager(text):", "echo", DEFINES_OTHER),
        ("def secho(message):", "echo", DEFINES_OTHER),
        ("def write(message, echo=True):", "echo", NOT_DEFINITION),  # a parameter, not the name defined
        ("    echo(text)", "echo", NOT_DEFINITION),
        ("- ``echo()`` does not fail", "echo", NOT_DEFINITION),
        ("The function is defined in utils.py", "defined", NOT_DEFINITION),
        ("define(echo)", "echo", NOT_DEFINITION),
    ],
)
def test_a_line_that_defines_what_the_pattern_names_ranks_first(line: str, pattern: str, rank: int) -> None:
    assert definition_rank(line, re.compile(pattern, re.IGNORECASE)) == rank


@given(st.text(max_size=300), st.sampled_from(["echo", "", ".*", "e*", r"\w+", "(?=x)", "def"]))
def test_ranking_a_line_is_total(line: str, pattern: str) -> None:
    assert definition_rank(line, re.compile(pattern)) in (DEFINES_MATCH, DEFINES_OTHER, NOT_DEFINITION)


def test_ranking_a_line_is_linear() -> None:
    pattern = re.compile("echo")
    assert growth(lambda n: definition_rank("def " + "echo" * n + " echo" * n, pattern), 5_000) < LINEAR_BOUND
    assert growth(lambda n: definition_rank("export " * n + "x", pattern), 5_000) < LINEAR_BOUND
