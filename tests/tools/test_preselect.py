"""Choosing tools up front: BM25 over a real MCP catalogue, and a small model where words do not settle it.

The catalogue is built from ``tools/list`` answers captured from published MCP servers (filesystem, git,
fetch, memory, time, GitHub) in ``tests/data/mcp_schemas``: 31 tools, the size a few connected servers give.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, Notice
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools._keywords import terms
from steadyloop.tools.loading import CatalogEntry, preselect, preselect_by_keywords
from steadyloop.wire.endpoints import Endpoint

_SCHEMAS = Path(__file__).parents[1] / "data" / "mcp_schemas"


def _server(label: str, names: Collection[str] | None = None) -> list[CatalogEntry]:
    listed = json.loads((_SCHEMAS / f"{label}.json").read_text())["tools"]
    return [
        CatalogEntry(tool["name"], label, tool["description"].strip().splitlines()[0])
        for tool in listed
        if names is None or tool["name"] in names
    ]


CATALOG = [
    *_server(
        "filesystem",
        {
            "read_text_file",
            "read_multiple_files",
            "write_file",
            "edit_file",
            "create_directory",
            "list_directory",
            "directory_tree",
            "move_file",
            "search_files",
            "get_file_info",
        },
    ),
    *_server(
        "git",
        {
            "git_status",
            "git_diff_unstaged",
            "git_diff_staged",
            "git_diff",
            "git_commit",
            "git_add",
            "git_log",
            "git_create_branch",
            "git_checkout",
        },
    ),
    *_server("fetch"),
    *_server(
        "memory", {"create_entities", "create_relations", "add_observations", "read_graph", "search_nodes"}
    ),
    *_server("time"),
    *_server("github", {"create_issue", "list_issues", "create_pull_request", "search_repositories"}),
]
NAMES = {entry.name for entry in CATALOG}


def test_the_catalogue_is_the_real_one() -> None:
    assert len(CATALOG) == 31
    assert {"read_text_file", "git_diff_staged", "fetch", "create_entities", "convert_time"} <= NAMES


# -- terms


def test_terms_split_names_and_drop_function_words() -> None:
    assert terms("git_diff_staged") == ["git", "diff", "staged"]
    assert terms("getFileInfo list-directories") == ["get", "file", "info", "list", "directory"]
    assert terms("parseHTTPResponse") == ["parse", "http", "response"]
    assert terms("Show me what is in the branches for this repo") == ["show", "branch", "repo"]
    assert terms("the of and for with") == []


# -- ranking


@pytest.mark.parametrize(
    ("request_text", "first"),
    [
        ("Show me the diff of what I staged", "git_diff_staged"),
        ("Open a pull request for my branch", "create_pull_request"),
        ("Fetch https://example.com and summarise it", "fetch"),
        ("Convert 3pm London time to New York", "convert_time"),
        ("Rename notes.txt to todo.txt", "move_file"),
        ("Show the git log", "git_log"),
        ("Create a GitHub issue about the crash", "create_issue"),
        ("Add an observation to Alice in the knowledge graph", "add_observations"),
    ],
)
def test_bm25_ranks_the_right_tool_first(request_text: str, first: str) -> None:
    selection = preselect_by_keywords(CATALOG, request_text)
    assert selection.names[0] == first
    assert max(selection.scores, key=lambda name: selection.scores[name]) == first


def test_a_shared_word_does_not_outrank_a_distinctive_one() -> None:
    # "file" is in a third of the catalogue, "staged" in two tools: Word overlap would tie them.
    selection = preselect_by_keywords(CATALOG, "which files are staged")
    assert selection.names[:2] == ["git_diff_staged", "git_diff_unstaged"]


def test_function_words_are_ignored() -> None:
    plain = preselect_by_keywords(CATALOG, "git log")
    padded = preselect_by_keywords(CATALOG, "could you please show me the git log for all of this")
    assert padded.names[0] == plain.names[0] == "git_log"
    assert preselect_by_keywords(CATALOG, "for the of with and to").names == []


def test_the_limit_caps_what_is_kept() -> None:
    selection = preselect_by_keywords(CATALOG, "list the files in the src directory", limit=2)
    assert len(selection.names) == 2
    assert selection.names[0] == "list_directory"


@given(st.permutations(CATALOG))
def test_scores_do_not_depend_on_catalogue_order(shuffled: list[CatalogEntry]) -> None:
    for request_text in ("Show me the diff of what I staged", "list the files in the src directory"):
        assert preselect_by_keywords(shuffled, request_text).scores == (
            preselect_by_keywords(CATALOG, request_text).scores
        )


# -- confidence


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("Show me the diff of what I staged", {"git_diff_staged", "git_diff_unstaged", "git_diff"}),
        ("Open a pull request", {"create_pull_request"}),
        ("Rename notes.txt to todo.txt", {"move_file"}),
        ("Show the git log", {"git_log"}),
        ("Fetch https://example.com", {"fetch"}),
    ],
)
def test_a_distinctive_match_with_a_clear_drop_is_confident(request_text: str, expected: set[str]) -> None:
    selection = preselect_by_keywords(CATALOG, request_text)
    assert selection.confident
    assert set(selection.names) == expected


def test_near_equals_on_both_sides_of_the_line_are_not_confident() -> None:
    # "list" is distinctive, but the tools just past the cut score nearly what the last kept one does.
    selection = preselect_by_keywords(CATALOG, "list the files in the src directory")
    assert selection.names[0] == "list_directory"
    assert not selection.confident
    left_out = sorted(set(selection.scores) - set(selection.names), key=lambda n: -selection.scores[n])
    assert selection.scores[left_out[0]] >= 0.5 * min(selection.scores[name] for name in selection.names)


def test_only_shared_words_is_not_confident_even_with_a_drop() -> None:
    # dropoff=1.0 makes any drop clear, so only the distinctive-word rule is left to say no.
    shared = preselect_by_keywords(CATALOG, "directory", limit=3, dropoff=1.0)
    assert shared.names and not shared.confident
    distinctive = preselect_by_keywords(CATALOG, "git log", limit=3, dropoff=1.0)
    assert distinctive.confident


def test_matching_nothing_is_not_confident() -> None:
    for request_text in ("What's the weather in Paris?", "hello", ""):
        selection = preselect_by_keywords(CATALOG, request_text)
        assert selection.names == [] and not selection.confident and selection.scores == {}
    assert not preselect_by_keywords([], "git log").confident


def test_the_bar_can_be_moved() -> None:
    assert not preselect_by_keywords(CATALOG, "Create a GitHub issue about the crash").confident
    assert preselect_by_keywords(CATALOG, "Create a GitHub issue about the crash", dropoff=0.75).confident


# -- preselect: words first, a small model for the rest


async def test_a_confident_keyword_selection_spends_no_request() -> None:
    async with ScriptedServer() as server:
        picked = await preselect(Endpoint(server.base_url), "small", CATALOG, "Show the git log")
        assert picked == ["git_log"]
        assert server.chat_requests == []


async def test_the_small_model_settles_what_words_cannot() -> None:
    answer = '{"tools": ["list_directory", "directory_tree", "not_a_tool", "LIST_DIRECTORY"]}'
    async with ScriptedServer(Reply.stream(text_chunks(answer))) as server:
        picked = await preselect(Endpoint(server.base_url), "small", CATALOG, "list the files in src")
        assert picked == ["list_directory", "directory_tree"]
        [request] = server.chat_requests
    body = request.json
    assert body["model"] == "small"
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "preselection"
    assert response_format["json_schema"]["schema"]["properties"]["tools"]["type"] == "array"
    system = body["messages"][0]["content"]
    assert "list_directory" in system and "git_diff_staged" in system
    assert body["messages"][-1]["content"] == "list the files in src"


async def test_a_bare_array_answer_is_accepted_and_capped() -> None:
    answer = json.dumps(["git_status", "git_diff", "git_log", "git_add"])
    async with ScriptedServer(Reply.stream(text_chunks(answer))) as server:
        picked = await preselect(Endpoint(server.base_url), "small", CATALOG, "help me with this", limit=2)
    assert picked == ["git_status", "git_diff"]


async def test_keywords_off_always_asks_the_model() -> None:
    async with ScriptedServer(Reply.stream(text_chunks('{"tools": ["git_log"]}'))) as server:
        picked = await preselect(
            Endpoint(server.base_url), "small", CATALOG, "Show the git log", keywords=False
        )
        assert picked == ["git_log"]
        assert len(server.chat_requests) == 1


async def test_nothing_usable_means_no_preselection() -> None:
    events: list[Event] = []
    async with ScriptedServer(Reply.stream(text_chunks('{"tools": ["made_up"]}'))) as server:
        picked = await preselect(Endpoint(server.base_url), "small", CATALOG, "hello", on_event=events.append)
    assert picked is None
    assert any(isinstance(event, Notice) and event.name == "preselect" for event in events)


async def test_a_failed_side_task_means_no_preselection() -> None:
    failure = Reply.json({"error": {"message": "bad request", "type": "invalid_request_error"}}, 400)
    async with ScriptedServer(failure) as server:
        picked = await preselect(Endpoint(server.base_url), "small", CATALOG, "hello")
    assert picked is None


async def test_no_model_means_no_preselection_at_all() -> None:
    async with ScriptedServer() as server:
        assert await preselect(Endpoint(server.base_url), "", CATALOG, "Show the git log") is None
        assert server.requests == []
