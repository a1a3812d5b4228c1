"""The Agent against a real llama-server and its small model: a multi-step tool task, events, usage, cache.

What is asserted is what the runtime controls: routed steps with ``tool_choice: "required"`` are held by the
server to a call of a declared tool with arguments of its schema, so the calls happen and run; which city
the 0.5B model names is its own business and is only printed. The test prints the figures it measured (run
pytest with -s to see them).
"""

from __future__ import annotations

import itertools
import time

from steadyloop.agent import Agent
from steadyloop.events import Event, ToolExecutionEnd, UsageReport
from steadyloop.loop import LoopPolicy
from steadyloop.messages import AssistantMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint

SYSTEM = "You are a weather assistant. Use get_weather for each city the user names, one city per call."


# Six tools with real descriptions: the tool block is the head of the prompt, as in a real agent, and the
# prompt cache's worth is measured against it.
@tool
def get_weather(city: str) -> str:
    """Get the current weather (temperature, sky, wind) for one city.

    Use this for questions about the weather right now.

    Args:
        city: the city name in English, for example Paris or Berlin.
    """
    return {"paris": "18C, clear sky", "berlin": "12C, light rain"}.get(city.strip().lower(), "unknown city")


@tool
def get_forecast(city: str, days: int = 3) -> str:
    """Get the weather forecast for the coming days in one city.

    Use this only for questions about future days.

    Args:
        city: the city name in English.
        days: how many days ahead, from 1 to 7.
    """
    return "mild"


@tool
def convert_temperature(celsius: float, unit: str = "F") -> str:
    """Convert a temperature given in degrees Celsius to Fahrenheit or Kelvin.

    Args:
        celsius: the temperature in degrees Celsius.
        unit: the target unit, F for Fahrenheit or K for Kelvin.
    """
    return "x"


@tool
def get_air_quality(city: str) -> str:
    """Get the air quality index and the main pollutant for one city.

    Args:
        city: the city name in English.
    """
    return "good"


@tool
def get_sunrise_sunset(city: str, date: str = "today") -> str:
    """Get the sunrise and sunset times for one city on a given date.

    Args:
        city: the city name in English.
        date: the date as YYYY-MM-DD, or today.
    """
    return "7:00/19:00"


@tool
def list_weather_alerts(country: str) -> str:
    """List the active severe weather alerts (storms, floods, heat) for a country.

    Args:
        country: the country name in English, for example France.
    """
    return "none"


TOOLS = [
    get_weather,
    get_forecast,
    convert_temperature,
    get_air_quality,
    get_sunrise_sunset,
    list_weather_alerts,
]


async def test_an_agent_completes_a_two_city_task_with_tools_over_several_steps(llama: Endpoint) -> None:
    endpoint = Endpoint(llama.base_url, llama.api_key, request_timeout=120.0)
    agent = Agent(
        endpoint,
        ModelParams(model="qwen", temperature=0, max_tokens=120),
        system=SYSTEM,
        tools=TOOLS,
        # A fresh question must be answered from a tool; after a tool result the model chooses.
        tool_choice=lambda wire: "required" if isinstance(wire[-1], UserMessage) else "auto",
        policy=LoopPolicy(tool_routing=True),
    )
    events: list[Event] = []
    agent.subscribe(events.append)
    # The second city arrives as a follow-up: this model's chat template asks for an answer after every
    # tool result, so the task is given to it one city at a time.
    agent.follow_up("Now check Berlin too: call get_weather for Berlin.")
    started = time.perf_counter()
    turn = await agent.prompt("What is the weather in Paris right now?")
    elapsed = time.perf_counter() - started

    assert turn.content.strip()
    calls = [c for m in agent.state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    steps_with_calls = sum(
        1 for m in agent.state.messages if isinstance(m, AssistantMessage) and m.tool_calls
    )
    # What the model did, for a failure: a 0.5B model may answer in words where a call was asked for, and
    # a notice says whether anything was downgraded or recovered on the way.
    story = [
        (type(m).__name__, getattr(m, "content", ""), [c.name for c in getattr(m, "tool_calls", ())])
        for m in agent.state.messages
    ] + [
        (e.type, getattr(e, "text", ""), getattr(e, "field", ""))
        for e in events
        if e.type in ("notice", "downgrade")
    ]
    # Each user message was answered by a call (required, held to the schema), the first and the follow-up.
    assert len(calls) >= 2 and steps_with_calls >= 2, story
    declared = {t.name: t for t in TOOLS}
    assert all(c.name in declared for c in calls), story
    for call in calls:
        required = declared[call.name].parameters.get("required", [])
        assert all(isinstance(call.arguments.get(name), str | int | float) for name in required), story
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert len(ends) == len(calls)
    assert all(e.disposition == "completed" and not e.result.is_error for e in ends), story

    kinds = [e.type for e in events if e.type != "message_update"]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    # Each step: turn_start ... message_start(assistant) ... message_end ... usage ... turn_end.
    assert kinds.count("turn_start") == kinds.count("turn_end") == kinds.count("usage")
    for start in [i for i, k in enumerate(kinds) if k == "turn_start"]:
        step = kinds[start : kinds.index("turn_end", start) + 1]
        assert step.index("usage") < step.index("turn_end")
        if "tool_execution_start" in step:
            assert step.index("usage") < step.index("tool_execution_start") < step.index("tool_execution_end")

    usage = [e for e in events if isinstance(e, UsageReport)]
    assert all(u.turn.prompt_tokens > 0 and u.turn.completion_tokens > 0 for u in usage)
    shares = [u.turn.cached_tokens / u.turn.prompt_tokens for u in usage[1:]]
    # What each request read from the cache, against the whole prompt of the request before it: the cache
    # serves that prompt again, and only what the step added (the call, its result) is computed. A share of
    # the new prompt would depend on how long the model's calls and their results were.
    reread = [u.turn.cached_tokens / before.turn.prompt_tokens for before, u in itertools.pairwise(usage)]
    shown = [c.arguments for c in calls]
    print(f"\n[agent acceptance] {len(usage)} requests in {elapsed:.1f}s, tool calls {shown}")
    print(f"[agent acceptance] prompt tokens {[u.turn.prompt_tokens for u in usage]}")
    print(f"[agent acceptance] cached share from the 2nd request: {[round(s, 3) for s in shares]}")
    print(f"[agent acceptance] cached, of the request before's prompt: {[round(s, 3) for s in reread]}")
    assert all(u.cache_broken is False for u in usage[1:])
    assert min(reread) >= 0.95
