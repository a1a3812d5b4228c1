"""A beta feature named in the request (``anthropic_beta``, from ``ModelParams.extra_body`` or an agent
document's ``model.extra_body``) goes to an Anthropic endpoint in the ``anthropic-beta`` header, on the turn
and on its token count, and never in the JSON body; a value that is no beta name is refused before sending.
Beta names are as Anthropic's API reference lists them (``context-1m-2025-08-07``,
``interleaved-thinking-2025-05-14``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.spec import SPEC_VERSION
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.anthropic.shape import anthropic_betas, anthropic_request

from .provider_doubles import DOUBLES

pytestmark = pytest.mark.timeout(60)
BETAS = ["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"]


async def test_the_named_betas_go_in_the_header_of_the_turn_and_of_its_count() -> None:
    double = DOUBLES["anthropic"]()
    spec = sl.parse_spec(
        {
            "spec": SPEC_VERSION,
            "model": {"name": double.model, "extra_body": {"anthropic_beta": [*BETAS, BETAS[0]]}},
        },
        bundle=False,
    ).spec
    async with ScriptedServer(double.plain) as server:
        endpoint = sl.Endpoint(server.base_url, "test-key", api="anthropic")
        agent = sl.agent_settings(spec).agent(endpoint)
        result = await agent.prompt("hi")
        asked = {r.path: r for r in server.requests}
    assert double.plain_text in str(result)
    for path in ("/v1/messages/count_tokens", "/v1/messages"):
        assert asked[path].header("anthropic-beta") == ",".join(BETAS)
        assert "anthropic_beta" not in asked[path].json and "extra_headers" not in asked[path].json


def test_one_name_is_a_header_of_one_name() -> None:
    request = anthropic_request({"model": "claude-sonnet-4-5", "messages": [], "anthropic_beta": BETAS[0]})
    assert request["extra_headers"] == {"anthropic-beta": BETAS[0]}
    assert "extra_headers" not in anthropic_request({"model": "claude-sonnet-4-5", "messages": []})


@pytest.mark.parametrize("bad", [7, {"x": 1}, ["ok-name", None], "two words", "x\r\ninjected: 1", ""])
def test_a_value_that_is_no_beta_name_is_refused(bad: Any) -> None:
    with pytest.raises(sl.InvalidInput, match="anthropic_beta"):
        anthropic_request({"model": "claude-sonnet-4-5", "messages": [], "anthropic_beta": bad})


@settings(deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.lists(st.text(max_size=40) | st.integers() | st.none(), max_size=5),
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True),
        st.lists(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True), max_size=5),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
        st.floats(),
    )
)
def test_any_value_is_header_safe_names_or_a_refusal(value: Any) -> None:
    try:
        names = anthropic_betas(value)
    except sl.InvalidInput:
        return
    assert len(set(names)) == len(names)
    header = ",".join(names)
    assert header.isascii() and header.isprintable() and " " not in header
    json.dumps(names)
