"""Files and folders a request names in words ("the tests folder", "the site config") are what the command's
first step looks at, as a path written out is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.described_paths import described_paths, names_the_project, readme_for_how, written_folders
from steadyloop.cli.kit import _file_tool_routing
from steadyloop.cli.tools import default_tools, listed_files, listed_folders
from steadyloop.loop import LoopPolicy, LoopResult, run_agent_loop
from steadyloop.messages import ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.tool_gate import tools_on_named_paths
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint

from ..edges._edges import LINEAR_BOUND, growth
from ._routed_read import read_then_answer

FILES = [
    "README.md",
    "pyproject.toml",
    "config/site.toml",
    "src/app/__init__.py",
    "src/app/render.py",
    "src/app/build.py",
    "tests/test_render.py",
    "docs/install.md",
    "docs/deploy.md",
]
FOLDERS = [".", "config", "docs", "src", "src/app", "tests"]


@pytest.mark.parametrize(
    ("request_text", "paths"),
    [
        ("Which file in the tests folder is the largest?", ["tests"]),
        ("What is in the directory docs?", ["docs"]),
        ("List the files in the src/app folder.", ["src/app"]),
        ("Which theme does the site config use?", ["config/site.toml"]),
        ("What is the title in the site's settings?", ["config/site.toml"]),
        ("What does the render module do?", ["src/app/render.py"]),
        ("Summarise the deploy doc.", ["docs/deploy.md"]),
        # a folder's name after "in", "inside" or "under", not a path written out
        ("Which file in docs has the most lines?", ["docs"]),
        ("What is inside the config?", ["config"]),
        ("How many files are in src/app?", []),
        ("What's in this file?", []),
        # a name alone is a plain word; "this folder" names no listed folder
        ("How do I build and deploy it?", []),
        ("What is in this folder?", ["."]),
        ("List the current directory.", ["."]),
        ("What is the folder for?", []),
        ("Which folder holds the tests?", []),
        ("", []),
        # a name only a file has, after "the" or its like in six languages; a top-level file only
        ("What does the README say?", ["README.md"]),
        ("¿Qué dice el README?", ["README.md"]),
        ("Que dit le README ?", ["README.md"]),
        ("Was steht in der README?", ["README.md"]),
        ("O que diz o README?", ["README.md"]),
        ("Cosa dice il README?", ["README.md"]),
        ("How do I write a good README?", []),  # any README, not this folder's
        ("How do README files work?", []),
        ("What does the Makefile do?", []),  # the folder has none
    ],
)
def test_the_paths_a_request_names_in_words(request_text: str, paths: list[str]) -> None:
    assert described_paths(request_text, FILES, FOLDERS) == paths


def test_a_word_many_paths_share_names_none_of_them() -> None:
    files = [f"pkg{i}/util.py" for i in range(5)]
    assert described_paths("What does the util module in python do?", files) == []
    assert described_paths("What does the util module do?", files[:2]) == files[:2]


@given(
    st.text(max_size=300),
    st.lists(st.text(max_size=40), max_size=20),
    st.lists(st.text(max_size=40), max_size=8),
)
def test_reading_any_request_and_listing_is_total(
    request_text: str, files: list[str], folders: list[str]
) -> None:
    found = described_paths(request_text, files, folders)
    assert len(found) <= 3 and all(p in files or p in folders for p in found)


def test_reading_huge_adversarial_requests_is_linear() -> None:
    assert growth(lambda n: described_paths("tests folder " * n, FILES, FOLDERS), 2_000) < LINEAR_BOUND
    assert (
        growth(lambda n: described_paths("site config render " * n, FILES * 4, FOLDERS), 2_000) < LINEAR_BOUND
    )


def _project(root: Path) -> None:
    for path, text in {
        "config/site.toml": 'title = "Notes"\ntheme = "paper"\n',
        "tests/test_big.py": "def test_a():\n    pass\n" * 40,
        "tests/test_small.py": "def test_b():\n    pass\n",
        "README.md": "# Site\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def test_the_command_holds_the_first_call_to_a_folder_named_in_words(tmp_path: Path) -> None:
    _project(tmp_path)
    assert listed_folders(tmp_path) == [".", "config", "tests"]
    routing = _file_tool_routing(tmp_path)
    assert routing.named_in_files is not None
    named = routing.named_in_files("Which file in the tests folder is the largest?")
    tools = [t.definition() for t in default_tools(tmp_path, compact=True)]
    body = {"tools": tools, "messages": [{"role": "user", "content": "the tests folder"}]}
    held = tools_on_named_paths(body, named)
    assert held is not None
    paths = {t["function"]["name"]: t["function"]["parameters"]["properties"]["path"]["enum"] for t in held}
    assert paths == {"list_dir": ["tests"]}
    assert listed_files(tmp_path)  # the folder's files are listed, so the config file can be named
    assert routing.named_in_files("Which theme does the site config use?") == ["config/site.toml"]


async def test_the_command_reads_the_config_named_in_words_before_it_answers(tmp_path: Path) -> None:
    """End to end through the loop with the command's routing over a real folder: "the site config" makes
    the first request a decision held to a read of config/site.toml, with no gate question first."""
    _project(tmp_path)
    result, first = await read_then_answer(
        tmp_path,
        _file_tool_routing(tmp_path),
        "Which theme does the site config use?",
        "config/site.toml",
        "The theme is paper.",
    )
    assert first["response_format"]["json_schema"]["name"] == "step"  # the decision, not the gate
    schema = json.dumps(first["response_format"]["json_schema"]["schema"])
    assert '"config/site.toml"' in schema and '"README.md"' not in schema and "list_dir" not in schema
    assert result.turn.content == "The theme is paper."
    read = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert read and 'theme = "paper"' in str(read[0].content)


@pytest.mark.parametrize(
    "request_text",
    [
        "What does this project do?",
        "What license does this project use?",
        "What is this repo about?",
        "Summarize the repository for me.",
        "Which Python version does our codebase need?",
        "How is my package laid out?",
        "What does this code base depend on?",
        "¿Qué hace este proyecto?",
        "¿Qué dice el README del proyecto?",
        "Que fait ce projet ?",
        "Was macht dieses Projekt?",
        "O que faz este projeto?",
        "Cosa fa questo progetto?",
    ],
)
def test_a_request_about_the_project_as_a_whole_is_about_its_files(request_text: str) -> None:
    assert names_the_project(request_text)


@pytest.mark.parametrize(
    "request_text",
    [
        "How do I start a Python project?",
        "What is a repository?",
        "How do I install the package requests?",
        "What does the library function strlen do?",
        "Projects I like: none.",
        "",
        "¿Cómo empiezo un proyecto de Python?",
        "¿Qué es un repositorio?",
        "Wie starte ich ein Projekt?",
    ],
)
def test_a_request_that_speaks_of_projects_in_general_is_not(request_text: str) -> None:
    assert not names_the_project(request_text)


@given(st.text(max_size=400))
def test_naming_the_project_is_read_from_any_text(text: str) -> None:
    assert names_the_project(text) in (True, False)


def test_naming_the_project_is_linear_in_the_request() -> None:
    assert growth(lambda n: names_the_project("this " * n + "projec"), 2_000) < LINEAR_BOUND


async def test_the_command_reads_the_project_for_a_question_about_it_with_no_gate_question(
    tmp_path: Path,
) -> None:
    """End to end through the loop with the command's routing: "What does this project do?" names no file,
    and its first request is the decision, a call, not the gate's question (which filed it under general
    knowledge, and the answer was made up)."""
    _project(tmp_path)
    result, first = await read_then_answer(
        tmp_path, _file_tool_routing(tmp_path), "What does this project do?", "README.md", "It builds a site."
    )
    assert first["response_format"]["json_schema"]["name"] == "step"  # the decision, not the gate
    assert "answer" not in json.dumps(first["response_format"]["json_schema"]["schema"])  # a call it must be
    assert result.turn.content == "It builds a site."
    read = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert read and "# Site" in str(read[0].content)


@pytest.mark.parametrize(
    "request_text", ["What does the README say?", "¿Qué dice el README?", "Was macht dieses Projekt?"]
)
async def test_the_command_reads_the_readme_named_or_the_project_spoken_of_in_any_of_six_languages(
    tmp_path: Path, request_text: str
) -> None:
    """End to end through the loop with the command's routing: asked in Spanish what the README says, the
    1.5B model's gate filed it under general knowledge and the answer was made up; the first request is
    now the decision, held to a call."""
    _project(tmp_path)
    result, first = await read_then_answer(
        tmp_path, _file_tool_routing(tmp_path), request_text, "README.md", "Construye un sitio."
    )
    assert first["response_format"]["json_schema"]["name"] == "step"  # the decision, not the gate
    assert "answer" not in json.dumps(first["response_format"]["json_schema"]["schema"])
    read = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert read and "# Site" in str(read[0].content)


@pytest.mark.parametrize(
    ("request_text", "folders"),
    [
        ("How many Python files are in src/steadyloop/cli?", ["src/steadyloop/cli"]),
        ("List ./tests/cli/ and src/app, then src/app again.", ["tests/cli", "src/app"]),
        ("What is in docs/page.", ["docs/page"]),  # the sentence's full stop is no part of it
        ("Read src/app/build.py", []),  # a file
        ("See https://example.com/a/b and ../up/there", []),
        ("What is in docs?", []),  # one name: the listed folders and the words around "folder" cover it
        ("a/1 a/2 a/3 a/4 a/5 a/6 a/7 a/8 a/9", []),  # too many to be the places asked about
    ],
)
def test_the_nested_paths_a_request_writes_out(request_text: str, folders: list[str]) -> None:
    assert written_folders(request_text) == folders


@given(st.text(alphabet=st.sampled_from("ab./-_ ?:\n"), max_size=300) | st.text(max_size=300))
def test_reading_written_paths_is_total(text: str) -> None:
    found = written_folders(text)
    assert all(isinstance(p, str) and p and not p.endswith("/") and ".." not in p.split("/") for p in found)


def test_reading_written_paths_is_linear() -> None:
    assert growth(lambda n: written_folders("a/" * n), 2_000) < LINEAR_BOUND
    assert growth(lambda n: written_folders("a-b.c" * n + "/"), 2_000) < LINEAR_BOUND


def _deep_project(root: Path) -> None:
    for path in ("src/app/cli/main.py", "src/app/cli/run.py", "src/app/core.py", ".hidden/x/y.txt"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x = 1\n")


def test_a_folder_written_out_below_the_listed_ones_is_named_to_the_routing(tmp_path: Path) -> None:
    _deep_project(tmp_path)
    assert "src/app/cli" not in listed_folders(tmp_path)  # the schema lists two levels down
    routing = _file_tool_routing(tmp_path)
    assert routing.named_in_files is not None
    assert routing.named_in_files("How many Python files are in src/app/cli?") == ["src/app/cli/"]
    for missing in ("src/app/gone", "src/zzz/x", ".hidden/x", "src/../src/app"):
        assert routing.named_in_files(f"What is in {missing}?") == [], missing


async def test_the_command_lists_a_folder_its_schema_does_not_list_when_the_request_writes_it_out(
    tmp_path: Path,
) -> None:
    """End to end through the loop with the command's routing: a folder three levels down, written out in
    the request, is the one path the decision may list (before, the schema let a small model list only
    src/app, and the count it gave was that folder's)."""
    _deep_project(tmp_path)
    result, first = await read_then_answer(
        tmp_path,
        _file_tool_routing(tmp_path),
        "How many Python files are in src/app/cli?",
        "src/app/cli",
        "There are 2 Python files.",
        tool="list_dir",
    )
    assert first["response_format"]["json_schema"]["name"] == "step"  # the decision, not the gate
    schema = json.dumps(first["response_format"]["json_schema"]["schema"])
    assert '"src/app/cli"' in schema and '"src/app"' not in schema and "read_file" not in schema
    assert result.turn.content == "There are 2 Python files."
    listed = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert listed and "main.py" in str(listed[0].content) and "core.py" not in str(listed[0].content)


@pytest.mark.parametrize(
    ("request_text", "named"),
    [
        ("How do I run the tests of this project?", ["README.md"]),
        ("How can I install this package?", ["README.md"]),
        ("how to run the tests", ["README.md"]),
        ("How do we build the repo?", ["README.md"]),
        # not about the project, or not asking how
        ("How do I delete a folder in Linux?", []),
        ("How do I parse JSON in JavaScript?", []),
        ("What does this project do?", []),
        ("Run the tests of this project.", []),
        ("How should I test this function?", []),  # "I test" is no Italian "i test"
        # the five other languages' "how", with the project or its tests
        ("¿Cómo ejecuto las pruebas?", ["README.md"]),
        ("Comment lancer les tests ?", ["README.md"]),
        ("Wie führe ich die Tests aus?", ["README.md"]),
        ("Como rodo os testes?", ["README.md"]),
        ("Come eseguo i test?", ["README.md"]),
        ("¿Cómo instalo este paquete?", ["README.md"]),
        ("¿Cómo borro una carpeta en Linux?", []),
    ],
)
def test_a_question_how_to_do_something_with_the_project_names_its_readme(
    request_text: str, named: list[str]
) -> None:
    assert readme_for_how(request_text, ["docs/README.md", "README.md", "setup.py"]) == named
    assert readme_for_how(request_text, ["docs/README.md", "setup.py"]) == []  # none at the top


@given(st.text(max_size=300), st.lists(st.text(max_size=30), max_size=10))
def test_finding_the_readme_is_total(request_text: str, files: list[str]) -> None:
    found = readme_for_how(request_text, files)
    assert len(found) <= 1 and all(p in files for p in found)


def test_finding_the_readme_is_linear() -> None:
    files = ["README.md", *(f"f{i}.py" for i in range(50))]
    assert growth(lambda n: readme_for_how("how do I this project " * n, files), 2_000) < LINEAR_BOUND


def _big_project(root: Path) -> None:
    """More files than a schema lists: read_file and list_dir then take free text."""
    _project(root)
    (root / "README.md").write_text("# Site\n\nRun the tests with `make check`.\n")
    for i in range(70):
        (root / "src" / "app" / f"mod{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / "app" / f"mod{i}.py").write_text("x = 1\n")


def test_in_a_folder_too_big_to_list_the_paths_named_in_words_still_hold_the_first_call(
    tmp_path: Path,
) -> None:
    _big_project(tmp_path)
    assert listed_files(tmp_path) == []  # the schema lists no files
    routing = _file_tool_routing(tmp_path)
    assert routing.named_in_files is not None
    tools = [t.definition() for t in default_tools(tmp_path, compact=True)]
    [read] = [t for t in tools if t["function"]["name"] == "read_file"]
    assert "enum" not in read["function"]["parameters"]["properties"]["path"]

    def held(request: str) -> dict[str, list[str]] | None:
        body = {"tools": tools, "messages": [{"role": "user", "content": request}]}
        found = tools_on_named_paths(body, routing.named_in_files(request), routing.path_arguments)
        if found is None:
            return None
        return {
            t["function"]["name"]: t["function"]["parameters"]["properties"]["path"]["enum"] for t in found
        }

    assert held("Which theme does the site config use?") == {"read_file": ["config/site.toml"]}
    assert held("How do I run the tests of this project?") == {"read_file": ["README.md"]}
    assert held("Which file in the tests folder is the largest?") == {"list_dir": ["tests"]}
    assert held("What is the weather in Paris?") is None


async def _decided_then_answered(
    root: Path, request: str, tool: str, path: str | None, answer: str
) -> tuple[LoopResult, list[dict[str, Any]]]:
    """The loop over ``root`` with the command's routing, against a server that decides one call of ``tool``
    on ``path`` (``None``: without one) and then answers; the result and every body the server was sent."""
    decision = json.dumps({"name": tool, "arguments": {} if path is None else {"path": path}})
    async with ScriptedServer(Reply.stream(stream_of(decision)), Reply.stream(stream_of(answer))) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content=request)],
            tools=default_tools(root, compact=True),
            policy=LoopPolicy(
                tool_routing=_file_tool_routing(root), retry=RetryPolicy(base_delay_s=0.01, max_retries=1)
            ),
        )
        return result, [r.json for r in server.chat_requests]


async def test_the_command_answers_how_from_the_readme_it_read_with_no_gate_question(tmp_path: Path) -> None:
    """End to end through the loop with the command's routing, in a folder too big for the schemas to list:
    "How do I run the tests of this project?" is a read of the README, and once it is read, the answer,
    with no gate question before either (the 1.5B model's gate, shown the README's first lines, asked for
    a listing of tests/ next)."""
    _big_project(tmp_path)
    answer = "Run `make check`."
    result, bodies = await _decided_then_answered(
        tmp_path, "How do I run the tests of this project?", "read_file", "README.md", answer
    )
    assert len(bodies) == 2 and bodies[0]["response_format"]["json_schema"]["name"] == "step"
    assert '"README.md"' in json.dumps(bodies[0]["response_format"]["json_schema"]["schema"])
    assert "response_format" not in bodies[1]  # the answer, asked without a gate question before it
    assert result.turn.content == answer
    read = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert read and "make check" in str(read[0].content)


async def test_asked_how_to_run_the_tests_the_command_reads_the_file_that_says_so(tmp_path: Path) -> None:
    """End to end: a README that says nothing of tests is passed over for the tox.ini that runs them (in
    click's source the README was read, and the answer came out as its opening)."""
    _big_project(tmp_path)
    (tmp_path / "README.md").write_text("# Site\n\nA static site builder.\n")
    (tmp_path / "tox.ini").write_text("[testenv]\ncommands = pytest {posargs}\n")
    answer = "Run `tox`."
    result, bodies = await _decided_then_answered(
        tmp_path, "How do I run the tests of this project?", "read_file", "tox.ini", answer
    )
    schema = json.dumps(bodies[0]["response_format"]["json_schema"]["schema"])
    assert '"tox.ini"' in schema and '"README.md"' not in schema
    assert result.turn.content == answer
    read = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert read and "pytest" in str(read[0].content)


async def test_asked_where_a_function_is_defined_the_command_reads_the_file_that_defines_it(
    tmp_path: Path,
) -> None:
    """End to end, in a folder too big for the schemas to list: the one file of the project that defines
    ``echo`` at its top level is the first read, and then the answer; a method of that name, a test's and a docs page's are not
    (in click's source the 1.5B model listed the folder and answered "in the tools section of the XML
    file")."""
    _big_project(tmp_path)
    (tmp_path / "src" / "app" / "utils.py").write_text("import sys\n\n\ndef echo(message=None):\n    pass\n")
    (tmp_path / "src" / "app" / "core.py").write_text("class Group:\n    def echo(self):\n        pass\n")
    (tmp_path / "tests" / "test_echo.py").write_text("def echo():\n    pass\n")
    (tmp_path / "README.md").write_text("# Site\n\n    def echo(x): ...\n")
    routing = _file_tool_routing(tmp_path)
    assert routing.named_in_files is not None
    assert routing.named_in_files("Where is the echo function defined?") == ["src/app/utils.py"]
    answer = "In src/app/utils.py."
    result, bodies = await _decided_then_answered(
        tmp_path, "Where is the echo function defined?", "read_file", "src/app/utils.py", answer
    )
    assert len(bodies) == 2 and bodies[0]["response_format"]["json_schema"]["name"] == "step"
    assert '"src/app/utils.py"' in json.dumps(bodies[0]["response_format"]["json_schema"]["schema"])
    # Once read, the answer, with no gate question (in attrs' source the gate asked for a listing next),
    # and naming the file read is no invention.
    assert "response_format" not in bodies[1]
    assert result.turn.content == answer


async def test_the_command_answers_what_a_folder_holds_once_it_is_listed_with_no_gate_question(
    tmp_path: Path,
) -> None:
    """End to end through the loop with the command's routing, in a folder too big for the schemas to
    list: "What is in this folder?" is a listing of ".", and once listed, the answer, with no gate question
    (in flask's source the 1.5B model's gate asked for a search after the listing, three times of three)."""
    _big_project(tmp_path)
    answer = "It holds config/, src/, tests/ and README.md."
    for path in (".", None):  # None: list_dir called without a path lists its default, "."
        result, bodies = await _decided_then_answered(
            tmp_path, "What is in this folder?", "list_dir", path, answer
        )
        assert len(bodies) == 2 and "response_format" not in bodies[1]
        assert result.turn.content == answer
