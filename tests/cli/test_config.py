"""Endpoint resolution and the file tools' scope, without running the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyloop.cli.config import EndpointChoice, load_config, resolve
from steadyloop.cli.tools import file_tools
from steadyloop.errors import InvalidInput
from steadyloop.tools.definition import ToolContext

CONFIG = {
    "default": "work",
    "endpoints": {
        "work": {
            "base_url": "https://llm.example/v1",
            "api_key_env": "WORK_KEY",
            "model": "big",
            "context_length": 8192,
        }
    },
}


def test_flags_win_over_everything() -> None:
    env = {"OPENAI_BASE_URL": "http://10.0.0.1/v1", "OPENAI_API_KEY": "k", "STEADYLOOP_MODEL": "env-model"}
    got = resolve(EndpointChoice(base_url="http://127.0.0.1:1/v1", model="flag"), env=env, config=CONFIG)
    assert (got.endpoint.base_url, got.endpoint.api_key, got.model) == ("http://127.0.0.1:1/v1", "k", "flag")


def test_openai_env_then_config_default() -> None:
    env = {"OPENAI_BASE_URL": "http://10.0.0.1/v1", "STEADYLOOP_MODEL": "env-model"}
    got = resolve(EndpointChoice(), env=env, config=CONFIG)
    assert (got.endpoint.base_url, got.model) == ("http://10.0.0.1/v1", "env-model")
    got = resolve(EndpointChoice(), env={"WORK_KEY": "secret"}, config=CONFIG)
    assert (got.endpoint.base_url, got.endpoint.api_key, got.model) == (
        "https://llm.example/v1",
        "secret",
        "big",
    )
    assert got.context_length == 8192


def test_presets_and_unknown_names() -> None:
    got = resolve(EndpointChoice(name="ollama"), env={}, config={})
    assert got.endpoint.base_url == "http://127.0.0.1:11434/v1" and got.model is None
    with pytest.raises(InvalidInput, match="no endpoint named 'nope'"):
        resolve(EndpointChoice(name="nope"), env={}, config={})
    with pytest.raises(InvalidInput, match="WORK_KEY"):
        resolve(EndpointChoice(name="work"), env={}, config=CONFIG)


def test_nothing_configured_starts_the_bundled_model() -> None:
    got = resolve(EndpointChoice(), env={}, config={}, start_local=lambda: ("http://127.0.0.1:5/v1", "alias"))
    assert (got.endpoint.base_url, got.model, got.label) == ("http://127.0.0.1:5/v1", "alias", "bundled")


def test_config_file_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert load_config(path) == {}
    path.write_text('[endpoints.x]\nmodel = "m"\n')
    with pytest.raises(InvalidInput, match="needs base_url"):
        load_config(path)


async def test_file_tools_refuse_paths_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "ok.txt").write_text("fine\n")
    tools = {t.name: t for t in file_tools(root)}
    read = tools["read_file"].execute
    assert "fine" in str(await read({"path": "ok.txt"}, ToolContext("c1", "read_file")))
    for path in ("../secret.txt", "link.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(PermissionError, match="outside the working directory"):
            await read({"path": path}, ToolContext("c2", "read_file"))
    listing = await tools["glob"].execute({"pattern": "*.txt"}, ToolContext("c3", "glob"))
    assert listing == "ok.txt"


async def test_a_path_the_model_quoted_is_read_as_the_path_it_quotes(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi\n")
    (tmp_path / "docs").mkdir()
    tools = {t.name: t for t in file_tools(tmp_path)}
    (tmp_path / ".git").mkdir()
    for quoted in ('".".', '.".', '""', "'.'"):
        listing = await tools["list_dir"].execute({"path": quoted}, ToolContext("c1", "list_dir"))
        assert (
            listing
            == "- docs/ (folder: empty)\n- notes.txt (3 bytes, 1 line)\n(hidden entries, named with a leading dot, are not shown)"
        ), quoted
    for written in ('"notes.txt"', "/notes.txt"):
        read = await tools["read_file"].execute({"path": written}, ToolContext("c2", "read_file"))
        assert "hi" in str(read)
    with pytest.raises(PermissionError):  # a root path that names nothing here stays outside
        await tools["read_file"].execute({"path": "/etc/hostname-nowhere"}, ToolContext("c4", "read_file"))
    with pytest.raises(PermissionError, match="outside the working directory"):  # quotes never lead out
        await tools["list_dir"].execute({"path": '".."'}, ToolContext("c3", "list_dir"))


def test_the_compact_set_and_a_listing_path_without_a_default_to_copy(tmp_path: Path) -> None:
    from steadyloop.cli.tools import default_tools

    assert [t.name for t in default_tools(tmp_path, compact=True)] == [
        "read_file",
        "list_dir",
        "search_text",
        "write_file",
    ]
    assert len(default_tools(tmp_path)) == 7
    [listing] = [t for t in default_tools(tmp_path) if t.name == "list_dir"]
    assert "default" not in listing.parameters["properties"]["path"]
    assert "path" not in listing.parameters.get("required", [])


def test_a_small_models_file_tools_name_the_paths_that_exist(tmp_path: Path) -> None:
    from steadyloop.cli.tools import default_tools

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "faq.md").write_text("q\n")
    (tmp_path / "notes.txt").write_text("n\n")
    (tmp_path / ".git").mkdir()
    tools = {t.name: t for t in default_tools(tmp_path, compact=True)}
    assert tools["list_dir"].parameters["properties"]["path"]["enum"] == [".", "docs"]
    assert tools["read_file"].parameters["properties"]["path"]["enum"] == ["docs/faq.md", "notes.txt"]
    searched = tools["search_text"].parameters["properties"]
    assert set(searched) == {"pattern"}  # a small folder is searched whole
    assert "enum" not in tools["write_file"].parameters["properties"]["path"]
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    many = tmp_path / "many"
    many.mkdir()
    for i in range(70):
        (many / f"f{i}.txt").write_text("x")
    tools = {t.name: t for t in default_tools(tmp_path, compact=True)}
    assert "enum" not in tools["read_file"].parameters["properties"]["path"]  # too many to name
    assert "path" in tools["search_text"].parameters["properties"]  # and a search may name one
    assert tools["list_dir"].parameters["properties"]["path"]["enum"] == [".", "a", "b", "c", "docs", "many"]
    assert all("enum" not in t.parameters["properties"].get("path", {}) for t in default_tools(tmp_path))


@pytest.mark.parametrize(
    ("argv", "label", "model", "expected"),
    [
        (["run", "hi"], "bundled", "qwen2.5-coder-0.5b-instruct", 0.2),  # the bundled model's own
        (["run", "--temperature", "0.9", "hi"], "bundled", "qwen2.5-coder-0.5b-instruct", 0.9),
        (["run", "hi"], "bundled", "smollm2-135m-instruct", None),  # a model with none of its own
        (["run", "hi"], "--base-url", "qwen2.5-coder-0.5b-instruct", None),  # a server the user runs
    ],
)
def test_the_bundled_model_is_asked_at_its_own_temperature_unless_told(
    argv: list[str], label: str, model: str, expected: float | None
) -> None:
    from steadyloop.cli.app import _agent_options_of, build_parser
    from steadyloop.cli.config import Resolved
    from steadyloop.wire.endpoints import Endpoint

    args = build_parser().parse_args(argv)
    resolved = Resolved(Endpoint("http://127.0.0.1:1/v1"), model, label)
    assert _agent_options_of(args, resolved).temperature == expected


def test_the_bundled_model_is_chosen_by_name_and_a_wrong_name_is_refused() -> None:
    from steadyloop.cli.config import DEFAULT_LOCAL_MODEL, local_model
    from steadyloop.errors import InvalidInput

    assert local_model({}) == DEFAULT_LOCAL_MODEL
    assert local_model({"STEADYLOOP_LOCAL_MODEL": " qwen-1.5b "}) == "qwen-1.5b"
    with pytest.raises(InvalidInput, match="llama-70b"):
        local_model({"STEADYLOOP_LOCAL_MODEL": "llama-70b"})


def test_the_local_server_config_takes_the_chosen_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from steadyloop.cli.commands import LocalChoice, _config, local_command
    from steadyloop.errors import InvalidInput

    monkeypatch.setenv("STEADYLOOP_LOCAL_MODEL", "qwen-1.5b")
    assert _config(LocalChoice()).model == "qwen-1.5b"
    assert _config(LocalChoice(model="qwen")).model == "qwen"  # the flag over the environment
    with pytest.raises(InvalidInput, match="--model goes with"):
        local_command("status", model="qwen")


async def test_a_small_models_read_file_reads_from_the_start_whole(tmp_path: Path) -> None:
    from steadyloop.cli.tools import default_tools

    (tmp_path / "todo.txt").write_text("1. Buy milk\n2. Call Alice\n3. Fix the bike\n")
    (tmp_path / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 451)))
    reading = {t.name: t for t in default_tools(tmp_path, compact=True)}["read_file"]
    # no line range to pick: asked for the second item, the whole small file holds it and its neighbours
    assert set(reading.parameters["properties"]) == {"path"}
    got = await reading.execute({"path": "todo.txt"}, ToolContext("c1", "read_file"))
    assert got == "1. Buy milk\n2. Call Alice\n3. Fix the bike"  # as it is: no line numbers to misread
    # past the first 400 lines it says what is left, and not an offset it cannot take
    long = await reading.execute({"path": "long.txt"}, ToolContext("c2", "read_file"))
    assert long.endswith("line 400\n[lines 1-400 of 450; search_text finds lines in the rest]")
    paged = {t.name: t for t in default_tools(tmp_path)}["read_file"]
    assert {"offset", "limit"} <= set(paged.parameters["properties"])
    tail = await paged.execute({"path": "long.txt", "offset": 449}, ToolContext("c3", "read_file"))
    assert tail == "   449  line 449\n   450  line 450\n[lines 449-450 of 450]"
