"""A request that names a function or setting defined in the user's files is first a read of that file:
the names a request mentions, what defines one, and the command's routing acting on it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.kit import _file_tool_routing
from steadyloop.cli.named_in_files import (
    asks_where_defined,
    code_names,
    declares,
    defines,
    files_defining,
    settings_asked,
)
from steadyloop.cli.steering import FILE_TOOL_ROUTING
from steadyloop.cli.tools import default_tools, listed_files
from steadyloop.messages import ToolResultMessage
from steadyloop.steering.tool_gate import tools_on_named_paths

from ..edges._edges import LINEAR_BOUND, growth
from ._routed_read import read_then_answer


@pytest.mark.parametrize(
    ("request_text", "names"),
    [
        ("What is the default value of max_workers in build_site?", ["max_workers", "build_site"]),
        ("Which file defines the function slugify?", ["slugify"]),
        ("What does parseConfig() return?", ["parseConfig"]),
        ("Where is render_page called, and render_page again?", ["render_page"]),
        ("What is in this folder?", []),
        ("How do I read a file in Python?", []),
        ("What does a_b do?", []),  # too short to mean one definition
        ("Where is the Context class defined?", ["Context"]),
        ("Where is the echo function defined?", ["echo"]),
        ("Which method of the class is slow?", []),  # "the class": no name before it
        ("Which file defines function slugify?", ["slugify"]),
        ("Is there a main function?", ["main"]),
        ("What does the main function do?", ["main"]),
    ],
)
def test_the_names_of_code_a_request_mentions(request_text: str, names: list[str]) -> None:
    assert code_names(request_text) == names


@pytest.mark.parametrize(
    ("text", "name", "defined"),
    [
        ("def build_site(root, max_workers=6):\n    pass\n", "build_site", True),
        ("def build_site(root, max_workers=6):\n    pass\n", "max_workers", True),
        ("async def fetch_page(url): ...", "fetch_page", True),
        ("class SiteBuilder:\n    ...", "SiteBuilder", True),
        ("MAX_PAGES = 40\n", "MAX_PAGES", True),
        ("[server]\nport_number = 8043\n", "port_number", True),
        ('{"max_workers": 4}', "max_workers", True),
        ("theme_name: paper\n", "theme_name", True),
        ("export function parseConfig(text) {}", "parseConfig", True),
        ("build_site(root)\n", "build_site", False),  # a call, not a definition
        ("if max_workers == 6:\n", "max_workers", False),
        ("max_workers == 6\n", "max_workers", False),
        ("    max_workers: int = 6\n", "max_workers", True),
        ("# build_sites are made here\n", "build_site", False),
    ],
)
def test_what_defines_a_name(text: str, name: str, defined: bool) -> None:
    assert defines(text, name) is defined


@given(st.text(max_size=300), st.text(alphabet="abc_XY", min_size=1, max_size=12))
def test_reading_any_text_is_total(text: str, name: str) -> None:
    assert isinstance(defines(text, name), bool)
    assert all(isinstance(n, str) for n in code_names(text))


def test_reading_huge_adversarial_text_is_linear() -> None:
    assert growth(lambda n: code_names("a_b(" * n), 2_000) < LINEAR_BOUND
    assert growth(lambda n: defines("(," * n + "\n" * n, "max_workers"), 2_000) < LINEAR_BOUND


def _project(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "build.py").write_text("def build_site(root, max_workers=6):\n    return root\n")
    (root / "src" / "cli.py").write_text("from build import build_site\n\nbuild_site('.')\n")
    (root / "README.md").write_text("# Site\nCall build_site to build.\n")
    (root / "logo.png").write_bytes(b"\x89PNG\0\0max_workers = 1")


def test_the_files_defining_a_name_are_the_listed_ones_that_define_it(tmp_path: Path) -> None:
    _project(tmp_path)
    named_in_files = files_defining(tmp_path, listed_files(tmp_path))
    assert named_in_files("What is the default value of max_workers in build_site?") == ["src/build.py"]
    assert named_in_files("What is in this folder?") == []
    # a name defined in more files than a request is about is a common word, not a name
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text("max_workers = 2\n")
    assert files_defining(tmp_path, listed_files(tmp_path))("What is max_workers?") == []


def test_the_routing_holds_the_first_call_to_the_files_that_define_a_name(tmp_path: Path) -> None:
    _project(tmp_path)
    tools = [t.definition() for t in default_tools(tmp_path, compact=True)]
    body = {
        "tools": tools,
        "messages": [{"role": "user", "content": "Default of max_workers in build_site?"}],
    }
    assert tools_on_named_paths(body) is None  # no path named in the request itself
    held = tools_on_named_paths(body, ["src/build.py", "not/listed.py"])
    assert held is not None
    paths = {t["function"]["name"]: t["function"]["parameters"]["properties"]["path"]["enum"] for t in held}
    assert paths == {"read_file": ["src/build.py"]}


async def test_the_command_reads_the_file_defining_a_named_function_before_it_answers(tmp_path: Path) -> None:
    """End to end through the loop with the command's routing over a real folder: the first request is the
    decision, held to a read of the file that defines ``build_site``, asked without the gate's question."""
    _project(tmp_path)
    routing = replace(FILE_TOOL_ROUTING, named_in_files=files_defining(tmp_path, listed_files(tmp_path)))
    result, first = await read_then_answer(
        tmp_path,
        routing,
        "What is the default value of max_workers in build_site?",
        "src/build.py",
        "It defaults to 6.",
    )
    assert first["response_format"]["json_schema"]["name"] == "step"  # the decision, not the gate
    schema = json.dumps(first["response_format"]["json_schema"]["schema"])
    assert '"src/build.py"' in schema and '"src/cli.py"' not in schema and "list_dir" not in schema
    assert result.turn.content == "It defaults to 6."
    read = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert read and "max_workers=6" in str(read[0].content)


@pytest.mark.parametrize(
    ("request_text", "keys"),
    [
        ("Which Python version does this project require?", ["python_requires", "requires-python"]),
        ("What is the minimum Python version?", ["python_requires", "requires-python"]),
        ("Which Python versions are supported?", ["python_requires", "requires-python"]),
        ("What does this project depend on?", ["install_requires", "dependencies"]),
        ("List the dependencies of the package.", ["install_requires", "dependencies"]),
        # Python spoken of with no version required of it, dependencies of no project
        ("Write a Python function that checks a version string.", []),
        ("What is the latest Python version?", []),
        ("What are the dependencies of this function?", []),
    ],
)
def test_the_project_settings_a_request_asks_of_in_words(request_text: str, keys: list[str]) -> None:
    assert settings_asked(request_text)[:2] == keys


@given(st.text(max_size=400))
def test_reading_the_settings_asked_of_is_total(text: str) -> None:
    assert all(isinstance(key, str) for key in settings_asked(text))


def test_reading_the_settings_asked_of_is_linear() -> None:
    assert growth(lambda n: settings_asked("python version " * n + "requires"), 2_000) < LINEAR_BOUND


@pytest.mark.parametrize(
    ("files", "declares"),
    [
        ({"setup.cfg": "[options]\npython_requires = >= 3.7\n", "setup.py": "setup()\n"}, ["setup.cfg"]),
        ({"setup.py": 'setup(\n    name="x",\n    python_requires=">=3.8",\n)\n'}, ["setup.py"]),
        ({"pyproject.toml": '[project]\nrequires-python = ">=3.9"\n'}, ["pyproject.toml"]),
        ({"PKG-INFO": "Metadata-Version: 2.1\nRequires-Python: >=3.7\n"}, ["PKG-INFO"]),
        # pytest's minversion is no Python version (the 1.5B model answered it, "6.2")
        ({"pyproject.toml": '[tool.pytest.ini_options]\nminversion = "6.2"\n'}, []),
    ],
)
def test_the_python_version_asked_of_is_a_read_of_the_file_that_declares_it(
    tmp_path: Path, files: dict[str, str], declares: list[str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "README.md").write_text("# X\nNeeds a recent Python version.\n")
    routing = _file_tool_routing(tmp_path)
    assert routing.named_in_files is not None
    assert routing.named_in_files("Which Python version does this project require?") == declares


def test_a_setting_asked_of_is_read_where_it_is_declared_not_in_a_file_its_words_describe(
    tmp_path: Path,
) -> None:
    # "the Python version" also describes a version.py: given both, the 1.5B model read packaging's
    # src/packaging/version.py and guessed.
    (tmp_path / "src" / "app").mkdir(parents=True)
    (tmp_path / "src" / "app" / "version.py").write_text('__version__ = "24.1"\n')
    (tmp_path / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.8"\n')
    routing = _file_tool_routing(tmp_path)
    assert routing.named_in_files is not None
    assert routing.named_in_files("Which Python version does this project require?") == ["pyproject.toml"]
    assert routing.named_in_files("What does the version python module say?") == ["src/app/version.py"]


@pytest.mark.parametrize(
    ("request_text", "asks"),
    [
        ("Where is the echo function defined?", True),
        ("where's the Context class declared", True),
        ("Where in src is parse_args implemented?", True),
        ("Which file defines the command decorator?", True),
        ("Which module has the Context class?", True),
        ("Where is the README?", False),
        ("What does the echo function do?", False),
    ],
)
def test_a_request_asks_where_something_is_defined(request_text: str, asks: bool) -> None:
    assert asks_where_defined(request_text) is asks


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("def echo(message=None):\n", 2),
        ("class Group:\n    def echo(self):\n", 1),  # a method only
        ("class Group:\n    def echo(self):\n\ndef echo():\n", 2),
        ("export async function echo(x) {}\n", 2),
        ("echo = make_echo()\n", 0),  # an assignment defines it, but declares nothing
        ("def echoes():\n", 0),
        ("# def echo() was removed\n", 0),
    ],
)
def test_how_a_file_declares_a_name(text: str, how: int) -> None:
    assert declares(text, "echo") == how


@given(st.text(max_size=300), st.text(max_size=20))
def test_reading_declarations_is_total(text: str, name: str) -> None:
    asks_where_defined(text)
    assert declares(text, name) in (0, 1, 2)


def test_reading_declarations_is_linear() -> None:
    assert growth(lambda n: asks_where_defined("where " * n + "is it"), 5_000) < LINEAR_BOUND
    assert growth(lambda n: declares("    def x():\n" * n, "echo"), 5_000) < LINEAR_BOUND
