"""``@tool`` schemas: what a tool declares, and strictness only where the caller asked for strict mode."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from steadyloop.request_body import ModelParams, build_body
from steadyloop.tools.definition import Tool, ToolContext, tool
from steadyloop.turn.capabilities import EndpointCapabilities, ModelCapabilities


class Place(BaseModel):
    city: str
    country: str | None = None


@tool
def get_weather(place: Place, unit: Literal["C", "F"] = "C") -> str:
    """Current weather.

    Args:
        place: where.
        unit: the temperature unit.
    """
    return f"{place.city}: 18{unit}"


@tool(strict=True)
def lookup(place: Place) -> str:
    """Look a place up."""
    return place.city


def _declared(*tools: Tool) -> str:
    body = build_body(ModelParams("m"), None, [], list(tools), EndpointCapabilities(), ModelCapabilities())
    return json.dumps(body["tools"])


def test_a_plain_tool_declares_no_closed_objects() -> None:
    assert "additionalProperties" not in json.dumps(get_weather.definition())
    assert "additionalProperties" not in _declared(get_weather)
    assert "strict" not in get_weather.definition()["function"]


async def test_unknown_arguments_are_still_refused_when_called() -> None:
    result = await get_weather.execute({"place": {"city": "Oslo"}, "colour": "red"}, ToolContext("c1", "w"))
    assert getattr(result, "is_error", False)
    assert "colour" in str(getattr(result, "content", ""))


def test_a_strict_tool_closes_every_object_and_says_it_is_strict() -> None:
    function = lookup.definition()["function"]
    assert function["strict"] is True
    parameters = function["parameters"]
    assert parameters["additionalProperties"] is False
    nested = [v for v in json.loads(json.dumps(parameters)).get("$defs", {}).values() if "properties" in v]
    assert nested and all(v["additionalProperties"] is False for v in nested)
    declared = json.loads(_declared(lookup))[0]["function"]
    assert declared["strict"] is True and declared["parameters"]["additionalProperties"] is False


def test_a_hand_written_schema_is_declared_as_given() -> None:
    async def run(arguments: dict[str, object], context: ToolContext) -> str:
        return "ok"

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False}
    given = Tool("search", "Search.", schema, run)
    assert json.loads(_declared(given))[0]["function"]["parameters"]["additionalProperties"] is False
