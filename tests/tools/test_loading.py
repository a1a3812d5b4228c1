"""On-demand tools: the catalogue, what each step declares, the load_tools meta-tool, carry-over, counts."""

from __future__ import annotations

from typing import Any

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.tools.definition import Tool, ToolContext, ToolResult
from steadyloop.tools.loading import (
    LOAD_TOOLS,
    MAX_CARRIED,
    MAX_PER_LOAD,
    CatalogEntry,
    ToolLoader,
    catalog_of,
)


def make_tool(name: str, description: str = "", label: str | None = "files") -> Tool:
    async def execute(arguments: dict[str, Any], context: ToolContext) -> str:
        return f"{name} ran"

    return Tool(
        name=name,
        description=description or f"Does {name}.\nMore detail that the catalogue leaves out.",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        label=label,
    )


NAMES = [f"tool_{i:02d}" for i in range(20)]
TOOLS = [make_tool(name) for name in NAMES]


def names(tools: list[Tool]) -> list[str]:
    return [tool.name for tool in tools]


async def load(loader: ToolLoader, requested: object) -> ToolResult:
    meta = loader.resolve(LOAD_TOOLS)
    assert meta is not None
    value = await meta.execute({"names": requested}, ToolContext(call_id="c1", name=LOAD_TOOLS))
    assert isinstance(value, ToolResult)
    return value


def text(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content


# -- the catalogue


def test_catalog_takes_the_first_line_and_the_label() -> None:
    tool = make_tool("read_file", "\n  Read a file.  \nArgs: path", label="filesystem")
    assert catalog_of([tool]) == [CatalogEntry("read_file", "filesystem", "Read a file.")]
    assert catalog_of([make_tool("x", " ", label=None)]) == [CatalogEntry("x", None, "")]


def test_caps_have_sensible_defaults() -> None:
    assert 1 <= MAX_PER_LOAD <= MAX_CARRIED


# -- what each step declares


def test_everything_is_declared_when_not_on_demand() -> None:
    loader = ToolLoader(TOOLS)
    assert names(loader.declared(1)) == NAMES
    assert names(loader.declared(7)) == NAMES
    assert loader.system_suffix(1) == ""
    assert loader.resolve(LOAD_TOOLS) is None
    assert loader.resolve("tool_03") is TOOLS[3]
    assert loader.loaded == [] and loader.carry_over() == []


def test_on_demand_declares_load_tools_and_what_is_loaded() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    assert names(loader.declared(1)) == [LOAD_TOOLS]
    loader.load(["tool_05", "tool_01"])
    assert sorted(names(loader.declared(2))) == [LOAD_TOOLS, "tool_01", "tool_05"]


def test_preselection_shapes_step_one_only() -> None:
    loader = ToolLoader(TOOLS, ondemand=True, preselected=["tool_02", "nope", "tool_04"])
    assert names(loader.declared(1)) == ["tool_02", "tool_04"]
    assert loader.system_suffix(1) == ""
    assert names(loader.declared(2)) == [LOAD_TOOLS]
    assert loader.system_suffix(2) != ""


def test_preselection_without_on_demand_gives_everything_back_on_step_two() -> None:
    loader = ToolLoader(TOOLS, preselected=["tool_09"])
    assert names(loader.declared(1)) == ["tool_09"]
    assert names(loader.declared(2)) == NAMES
    assert loader.system_suffix(1) == loader.system_suffix(2) == ""


def test_an_empty_or_unknown_preselection_is_no_preselection() -> None:
    for chosen in ([], ["missing"]):
        loader = ToolLoader(TOOLS, ondemand=True, preselected=chosen)
        assert names(loader.declared(1)) == [LOAD_TOOLS]


def test_tools_left_out_of_the_catalogue_are_always_declared() -> None:
    catalog = catalog_of(TOOLS[1:])
    loader = ToolLoader(TOOLS, catalog, ondemand=True)
    assert names(loader.declared(1)) == [LOAD_TOOLS, "tool_00"]
    assert "tool_00" not in loader.system_suffix(1)
    assert loader.resolve("tool_00") is TOOLS[0]
    assert loader.loaded == [] and loader.tools_loaded == 0


def test_catalogue_entries_must_name_tools() -> None:
    with pytest.raises(InvalidInput, match="ghost"):
        ToolLoader(TOOLS, [CatalogEntry("ghost", None, "")], ondemand=True)
    with pytest.raises(InvalidInput):
        ToolLoader([make_tool(LOAD_TOOLS)])
    with pytest.raises(InvalidInput):
        ToolLoader([make_tool("a"), make_tool("a")])


# -- the catalogue on the system prompt


async def test_system_suffix_is_identical_on_every_step_whatever_is_loaded() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    before = loader.system_suffix(1)
    assert before.startswith("\n\n")
    assert all(name in before for name in NAMES)
    assert "More detail" not in before, "only the first line of a description is shown"
    await load(loader, ["tool_00", "tool_01"])
    loader.resolve("tool_07")
    assert loader.system_suffix(2) == before
    assert loader.system_suffix(9) == before


def test_catalogue_text_does_not_depend_on_tool_order() -> None:
    mixed = [make_tool("b", label="git"), make_tool("a", label="files"), make_tool("c", label="files")]
    first = ToolLoader(mixed, ondemand=True).system_suffix(1)
    second = ToolLoader(list(reversed(mixed)), ondemand=True).system_suffix(1)
    assert first == second
    assert first.index("files:") < first.index("- a:") < first.index("- c:") < first.index("git:")


# -- load_tools


async def test_load_tools_loads_and_lists_what_is_available() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    result = await load(loader, ["tool_03", "tool_04"])
    assert not result.is_error
    assert "Loaded tool_03, tool_04" in text(result)
    assert "Tools you can call now: tool_03, tool_04." in text(result)
    assert loader.loaded == ["tool_03", "tool_04"]
    assert loader.tools_loaded == 2


async def test_load_tools_says_when_a_tool_is_already_loaded() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    await load(loader, ["tool_03"])
    result = await load(loader, ["tool_03", "tool_03", "tool_05"])
    assert "Already loaded" in text(result) and "tool_03" in text(result)
    assert "Loaded tool_05" in text(result)
    assert loader.redundant_loads == 1
    assert loader.tools_loaded == 2
    assert loader.loaded == ["tool_03", "tool_05"]


async def test_load_tools_reports_unknown_names_with_near_matches() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    result = await load(loader, ["tool_3", "weather"])
    assert result.is_error
    assert "'tool_3'" in text(result) and "Did you mean" in text(result) and "tool_03" in text(result)
    assert "'weather'" in text(result)
    assert loader.unknown_tool_names == ["tool_3", "weather"]
    assert loader.loaded == []
    assert result.details["unknown"] == ["tool_3", "weather"]


async def test_load_tools_holds_to_its_cap_and_says_which() -> None:
    loader = ToolLoader(TOOLS, ondemand=True, max_per_load=3)
    result = await load(loader, NAMES[:5])
    assert loader.loaded == NAMES[:3]
    assert "Only 3 tools can be loaded per call" in text(result)
    assert "tool_03, tool_04" in text(result)
    assert result.details["over_cap"] == ["tool_03", "tool_04"]
    assert "up to 3 per call" in loader.system_suffix(1)


async def test_load_tools_reads_sloppy_arguments() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    await load(loader, "tool_01, tool_02")
    assert loader.loaded == ["tool_01", "tool_02"]
    result = await load(loader, None)
    assert result.is_error and "No names" in text(result)


# -- calling a catalogued tool without loading it


def test_a_catalogued_tool_called_directly_is_loaded_and_run() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    assert loader.resolve("tool_11") is TOOLS[11]
    assert loader.loaded == ["tool_11"]
    assert loader.tools_loaded == 1
    assert "tool_11" in names(loader.declared(2))
    assert loader.resolve("tool_11") is TOOLS[11]
    assert loader.tools_loaded == 1, "a second call is not a second load"


def test_an_unknown_call_resolves_to_nothing() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    assert loader.resolve("nope") is None
    assert loader.unknown_tool_names == ["nope"]


# -- carry-over


def test_carried_tools_start_loaded_and_are_not_counted() -> None:
    loader = ToolLoader(TOOLS, ondemand=True, carried=["tool_01", "gone", "tool_02"])
    assert loader.loaded == ["tool_01", "tool_02"]
    assert loader.tools_loaded == 0
    assert sorted(names(loader.declared(1))) == [LOAD_TOOLS, "tool_01", "tool_02"]


async def test_carry_over_keeps_the_most_recently_used_up_to_the_cap() -> None:
    loader = ToolLoader(TOOLS, ondemand=True, max_carried=3)
    await load(loader, ["tool_00", "tool_01", "tool_02", "tool_03"])
    loader.resolve("tool_00")  # used again: more recent than the others
    assert loader.carry_over() == ["tool_02", "tool_03", "tool_00"]
    following = ToolLoader(TOOLS, ondemand=True, max_carried=3, carried=loader.carry_over())
    assert following.carry_over() == ["tool_02", "tool_03", "tool_00"]


def test_carry_over_default_cap() -> None:
    loader = ToolLoader(TOOLS, ondemand=True)
    for name in NAMES:
        loader.resolve(name)
    assert loader.carry_over() == NAMES[-MAX_CARRIED:]
    assert ToolLoader(TOOLS, ondemand=True, max_carried=0, carried=NAMES).carry_over() == []


# -- the tools in force changing mid-run


async def test_retool_drops_what_is_gone_and_keeps_what_was_loaded() -> None:
    loader = ToolLoader(TOOLS[:4], ondemand=True)
    await load(loader, ["tool_00", "tool_01"])
    assert names(loader.declared(2)) == [LOAD_TOOLS, "tool_00", "tool_01"]
    loader.retool([TOOLS[1], TOOLS[2], TOOLS[5]])
    assert names(loader.declared(2)) == [LOAD_TOOLS, "tool_01"]
    assert loader.resolve("tool_00") is None and loader.resolve("tool_05") is TOOLS[5]
    assert "tool_00" not in loader.system_suffix(2) and "tool_05" in loader.system_suffix(2)
    assert sorted(loader.names()) == [LOAD_TOOLS, "tool_01", "tool_02", "tool_05"]
    assert "tool_05" in loader.carry_over()  # resolving it loaded it, as a call to it would


def test_retool_keeps_a_given_catalogue_less_what_is_gone_and_refuses_what_the_constructor_does() -> None:
    catalog = [CatalogEntry("tool_00", None, "first"), CatalogEntry("tool_01", None, "second")]
    loader = ToolLoader(TOOLS[:3], catalog, ondemand=True)
    loader.retool([TOOLS[1], TOOLS[2]])
    assert "- tool_01: second" in loader.system_suffix(2) and "tool_00" not in loader.system_suffix(2)
    assert names(loader.declared(2)) == [LOAD_TOOLS, "tool_02"]  # not catalogued: always declared
    with pytest.raises(InvalidInput, match="two tools are named"):
        loader.retool([TOOLS[1], TOOLS[1]])
