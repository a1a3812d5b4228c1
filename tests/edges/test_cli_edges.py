"""The command line's own parsing, fed hostile argv, config files and agent files in-process: only
argparse's usage error (exit 2, with a message) or a typed ``InvalidInput`` may come out, and what parses
holds only values the rest of the CLI can use.

Each stage is what ``steadyloop.cli.app.main`` does before it reaches the network: argv through the parser,
then the flags' values through the pure steps that read them (the endpoint choice, the flag layer of the
agent settings, the MCP command lines, the server's tokens and bind, the session store's target), then the
config file and an agent document through their readers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop import InvalidInput
from steadyloop.cli.agent_file import (
    cli_settings,
    flag_layer,
    load_agent_file,
    resolve_for_agent,
    servers_of,
)
from steadyloop.cli.app import COMMANDS, MAX_OPTIONS, _with_shorthand, build_parser, parse_argv
from steadyloop.cli.config import EndpointChoice, load_config, resolve
from steadyloop.cli.flag_values import MAX_COUNT
from steadyloop.cli.run import load_image, load_schema
from steadyloop.cli.serve import check_open_bind, parse_tokens
from steadyloop.errors import SteadyloopError
from steadyloop.sessions import open_store
from steadyloop.spec import AgentSpec

from ._edges import LINEAR_BOUND, any_text, growth, mutated_text, odd_texts

# -- argv ---------------------------------------------------------------------------------------------


def _flags_by_command() -> dict[str, list[argparse.Action]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        command: [a for a in sub.choices[command]._actions if a.option_strings and a.dest != "help"]
        for command in COMMANDS
    }


FLAGS = _flags_by_command()
NUMBERS = [
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "-1", "0", "-0", "1", "0.5",
    "65535", "65536", "99999999999999999999", "2147483648", "0x10", "1_000", " 5 ", "١٢٣", "１２３", "",
    "1" * 5_000, "1e-999",
]  # fmt: skip
values = st.sampled_from(NUMBERS) | any_text | odd_texts


@st.composite
def _flag_with_value(draw: st.DrawFn, action: argparse.Action) -> list[str]:
    """One flag as a user might write it: mostly a value of its kind, sometimes anything at all."""
    flag = draw(st.sampled_from(action.option_strings))
    if action.nargs == 0:  # a switch
        return [flag]
    if action.choices is not None and draw(st.booleans()):
        value = draw(st.sampled_from(sorted(action.choices)))
    elif action.type not in (None, str) and draw(st.booleans()):
        value = draw(st.sampled_from(NUMBERS))  # a number flag
    else:
        value = draw(values)
    return [f"{flag}={value}"] if draw(st.integers(0, 4)) == 0 else [flag, value]


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    """A command's argv: its real flags with hostile values, flags without values, unknown flags, words."""
    command = draw(st.sampled_from([*COMMANDS, ""]))
    flags = FLAGS.get(command, FLAGS["run"])
    argv = [command] if command else []
    if command == "local":
        argv.append(draw(st.sampled_from(["up", "down", "status"])))
    for _ in range(draw(st.integers(0, 6))):
        how = draw(st.sampled_from(["flag"] * 6 + ["bare flag", "unknown", "word"]))
        if how == "flag":
            argv += draw(_flag_with_value(draw(st.sampled_from(flags))))
        elif how == "bare flag":
            argv.append(draw(st.sampled_from(draw(st.sampled_from(flags)).option_strings)))
        elif how == "unknown":
            argv.append("--" + draw(any_text))
        else:
            argv.append(draw(values))
    return argv


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """argparse's usage and help, kept off the test's output and read back."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
        yield said


def _parsed(argv: list[str]) -> argparse.Namespace | None:
    """``argv`` as ``main`` parses it; ``None`` when argparse exits (asserted to be a documented exit)."""
    with _quiet() as said:
        try:
            return parse_argv(build_parser(), _with_shorthand(argv, stdin_piped=False))
        except SystemExit as exc:
            asked_for_help = {"-h", "--help", "-V", "--version"} & set(argv)
            if exc.code == 0:
                assert asked_for_help, argv
            else:
                assert exc.code == 2, (argv, exc.code)
                assert "error: " in said.getvalue(), said.getvalue()
            return None


def _check_values(args: argparse.Namespace) -> None:
    """What parsed holds only values the later steps can use."""
    for name in ("max_turns", "max_tokens", "ctx", "max_runs"):
        value = getattr(args, name, None)
        assert value is None or 1 <= value <= MAX_COUNT, (name, value)
    for name in ("temperature", "idle"):
        value = getattr(args, name, None)
        assert value is None or (math.isfinite(value) and value >= 0), (name, value)
    port = getattr(args, "port", None)
    assert port is None or 0 <= port <= 65535
    for name in ("host", "workdir", "node"):
        value = getattr(args, name, None)
        assert value is None or "\x00" not in value


def _local() -> tuple[str, str]:
    return "http://127.0.0.1:9/v1", "bundled-model"


def _downstream(args: argparse.Namespace) -> None:
    """The pure steps ``main`` takes with the parsed flags before any request, each allowed only a
    ``SteadyloopError``."""
    steps: list[Any] = []
    if hasattr(args, "base_url"):
        choice = EndpointChoice(
            name=getattr(args, "local_preset", None) or args.endpoint,
            base_url=args.base_url,
            api_key=args.api_key,
            model=args.model,
            provider=args.provider,
            api=args.api,
        )
        steps.append(lambda: resolve(choice, env={}, config={}, start_local=_local))
    if hasattr(args, "max_turns"):
        layer = lambda: flag_layer(  # noqa: E731
            think=args.think,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            max_turns=args.max_turns,
            tools=not args.no_tools,
        )
        steps.append(layer)
        steps.append(
            lambda: cli_settings(
                AgentSpec(),
                model="m",
                window=None,
                tools=[],
                servers=servers_of(args.mcp),
                require_for=(),
                flags=layer(),
                system=args.system,
                default_system="x",
            )
        )
    if getattr(args, "command", None) == "serve":
        steps.append(lambda: check_open_bind(args.host, parse_tokens(args.token, env={})))
    if getattr(args, "store", None) is not None:
        steps.append(lambda: asyncio.run(open_store(args.store).close()))
    for step in steps:
        with contextlib.suppress(SteadyloopError):
            step()


@given(argvs())
def test_argv_parses_to_usable_values_or_is_a_usage_error(argv: list[str]) -> None:
    args = _parsed(argv)
    if args is not None:
        _check_values(args)
        _downstream(args)


NUMBER_FLAGS = [
    (command, action)
    for command in COMMANDS
    for action in FLAGS[command]
    if action.type not in (None, str) and action.choices is None and action.nargs != 0
]


@given(st.sampled_from(NUMBER_FLAGS), st.sampled_from(NUMBERS) | values, st.booleans())
def test_a_number_flag_holds_only_a_usable_number_or_is_a_usage_error(
    flag: tuple[str, argparse.Action], value: str, joined: bool
) -> None:
    command, action = flag
    head = [command, "up"] if command == "local" else [command]
    option = action.option_strings[-1]
    args = _parsed([*head, f"{option}={value}"] if joined else [*head, option, value])
    if args is not None:
        _check_values(args)
        _downstream(args)


NUMERIC = [
    ("run", "--temperature"),  # any finite number from 0: servers differ on the ceiling
    ("run", "--max-turns"),
    ("run", "--max-tokens"),
    ("run", "--idle"),
    ("local", "--ctx"),
    ("local", "--port"),
    ("local", "--idle"),
    ("serve", "--port"),
    ("serve", "--max-runs"),
]
TOO_BIG = {"--max-turns", "--max-tokens", "--ctx", "--port", "--max-runs"}


@pytest.mark.parametrize(("command", "flag"), NUMERIC, ids=[f"{c} {f}" for c, f in NUMERIC])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e999", "99999999999", "\x00", "x", ""])
def test_a_numeric_flag_out_of_range_is_a_usage_error_naming_it(command: str, flag: str, value: str) -> None:
    # These parsed as float or int and reached the model server, uvicorn or a socket call as they were.
    args = [command, "up"] if command == "local" else [command]
    refused = value != "99999999999" or flag in TOO_BIG
    try:
        with _quiet() as said:
            build_parser().parse_args([*args, f"{flag}={value}"])
    except SystemExit as exc:
        assert refused and exc.code == 2 and f"argument {flag}: " in said.getvalue(), said.getvalue()
    else:
        assert not refused, (flag, value)


@pytest.mark.parametrize(
    ("flag", "value"), [("--host", "\x00"), ("--host", ""), ("--workdir", "a\x00b"), ("--node", "\ud800")]
)
def test_a_serve_text_flag_no_system_call_takes_is_a_usage_error(flag: str, value: str) -> None:
    with _quiet() as said, pytest.raises(SystemExit) as caught:
        build_parser().parse_args(["serve", f"{flag}={value}"])
    assert caught.value.code == 2 and f"argument {flag}: " in said.getvalue()


@pytest.mark.parametrize("line", ['"unclosed', "tail\\", "a\x00b"], ids=ascii)
def test_an_mcp_line_that_cannot_be_split_is_invalid_input(line: str) -> None:
    # shlex raised ValueError ("No closing quotation"); a NUL failed only when the server was started.
    with pytest.raises(InvalidInput, match="MCP server command line"):
        servers_of([line])


@pytest.mark.parametrize("given", [["=tok-123456"], ["na me=tok-123456"], ["bob=tok 123456"], ["bob=t\x00k"]])
def test_a_token_flag_with_an_unusable_name_or_token_is_invalid_input(given: list[str]) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_tokens(given, env={})
    assert "123456" not in str(caught.value)  # the token itself is never shown


def test_parsing_argv_is_linear_in_its_length() -> None:
    # Words of a prompt: argparse reads them in one pass.
    def words(n: int) -> None:
        build_parser().parse_args(["run", "--system", "s" * n, *["word"] * n])

    assert growth(words, 2_000) < LINEAR_BOUND

    # Options: argparse's own time grows with their square, so past MAX_OPTIONS they are refused unread.
    def options(n: int) -> None:
        with _quiet(), contextlib.suppress(SystemExit):
            parse_argv(build_parser(), ["run", *["--mcp", "server --flag"] * n, "prompt"])

    assert growth(options, MAX_OPTIONS) < LINEAR_BOUND


def test_a_command_line_with_too_many_options_is_a_usage_error() -> None:
    with _quiet() as said, pytest.raises(SystemExit) as caught:
        parse_argv(build_parser(), ["run", *["-q"] * (MAX_OPTIONS + 1), "prompt"])
    assert caught.value.code == 2 and "too many options" in said.getvalue()
    assert parse_argv(build_parser(), ["run", *["-q"] * MAX_OPTIONS, "--", *["-q"] * 5]).prompt == ["-q"] * 5


# -- the config file ----------------------------------------------------------------------------------

CONFIG_SEED = """\
default = "work"

[endpoints.work]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "WORK_KEY"
model = "big-model"
context_length = 131072

[endpoints.other]
base_url = "https://llm.example.com/v1"
"""
TOML_VALUES = [
    '"x"', '""', "1", "-1", "0", "true", "nan", "-inf", "1979-05-27T07:32:00Z", "[1, \"a\"]", "{a = 1}",
    "[]", "{}", '"\\u0000"', '"http://a\\u0000b"', '"' + "x" * 100_000 + '"', "[" * 2_000 + "]" * 2_000,
    "9" * 30, '"llamacpp"', '"work"',
]  # fmt: skip
KEYS = ["default", "base_url", "api_key_env", "model", "context_length", "endpoints", "[endpoints]", "work"]


@st.composite
def config_texts(draw: st.DrawFn) -> bytes:
    """The seed with values swapped for other TOML types, cut or spliced, or bytes that are no UTF-8."""
    how = draw(st.sampled_from(["retyped", "retyped", "mutated", "bytes", "nested"]))
    if how == "bytes":
        return draw(st.binary(max_size=200)) + b"\xff\xfe" * draw(st.integers(0, 2))
    if how == "nested":
        depth = draw(st.integers(1, 5_000))
        return (f"default = {'[' * depth}{']' * depth}\n" + CONFIG_SEED.split("\n", 1)[1]).encode()
    text = CONFIG_SEED
    if how == "mutated":
        text = draw(mutated_text(text))
    else:
        lines = text.splitlines()
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(lines) - 1))
            key = draw(st.sampled_from(KEYS))
            lines[at] = f"{key} = {draw(st.sampled_from(TOML_VALUES))}"
        text = "\n".join(lines)
    return text.encode("utf-8", "surrogatepass")


def _write(folder: str, name: str, data: bytes) -> Path:
    path = Path(folder) / name
    path.write_bytes(data)
    return path


@given(config_texts())
def test_a_config_file_is_read_or_refused_as_invalid_input(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        try:
            config = load_config(_write(folder, "config.toml", data))
        except InvalidInput:
            return
    for name in [None, *config.get("endpoints", {})]:
        with contextlib.suppress(InvalidInput):
            resolve(EndpointChoice(name=name), env={"WORK_KEY": "k"}, config=config, start_local=_local)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b'default = [1]\n[endpoints.a]\nbase_url = "http://x"', "default must be the name"),
        (b"default = {a = 1}", "default must be the name"),
        (b"a = " + b"[" * 100_000, "nested too deep"),
        (b'[endpoints.a]\nbase_url = "http://x"\ncontext_length = true', "context_length"),
        (b'[endpoints.a]\nbase_url = "http://x"\ncontext_length = -5', "context_length"),
        (b'[endpoints.a]\nbase_url = "http://x"\nmodel = 3', "model must be a string"),
        (b'[endpoints.a]\nbase_url = "http://x"\napi_key_env = []', "api_key_env must be a string"),
    ],
    ids=[
        "bytes",
        "list default",
        "table default",
        "deep",
        "bool window",
        "negative window",
        "model",
        "key env",
    ],
)
def test_what_escaped_the_config_reader_is_invalid_input(tmp_path: Path, data: bytes, said: str) -> None:
    # UnicodeDecodeError, TypeError (an unhashable default), RecursionError; wrong types were dropped unsaid.
    with pytest.raises(InvalidInput, match=said):
        load_config(_write(str(tmp_path), "config.toml", data))


def test_reading_a_config_file_is_linear_in_its_length(tmp_path: Path) -> None:
    def read(n: int) -> None:
        entries = "".join(f'[endpoints.e{i}]\nbase_url = "http://127.0.0.1:{i}/v1"\n' for i in range(n))
        load_config(_write(str(tmp_path), "c.toml", entries.encode()))

    assert growth(read, 200) < LINEAR_BOUND


# -- agent files and the other files a flag names --------------------------------------------------------

AGENT_SEED_TOML = """\
spec = "steadyloop/agent@1"
name = "helper"
prompt = "You help."

[endpoint]
base_url = "http://127.0.0.1:9/v1"
request_timeout = 30

[model]
name = "m"
temperature = 0.2
max_tokens = 100

[loop]
max_turns = 4
"""


@given(
    st.sampled_from(["toml", "json"]),
    mutated_text(AGENT_SEED_TOML) | st.binary(max_size=100).map(lambda b: b.decode("latin-1")) | odd_texts,
)
def test_an_agent_file_is_read_or_refused_as_invalid_input(suffix: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(folder, f"agent.{suffix}", text.encode("utf-8", "surrogatepass"))
        with _quiet():
            try:
                spec = load_agent_file(str(path))
            except InvalidInput:
                return
    with contextlib.suppress(InvalidInput):
        resolve_for_agent(spec, EndpointChoice(), env={}, start_local=_local)
        cli_settings(
            spec,
            model="m",
            window=None,
            tools=[],
            servers=[],
            require_for=(),
            flags=flag_layer(think=None, temperature=None, max_tokens=None, max_turns=None, tools=True),
            system=None,
            default_system="x",
        )


@pytest.mark.parametrize("name", ["a\x00b.toml", "\ud800.toml"], ids=ascii)
def test_a_file_name_no_system_call_takes_is_invalid_input(name: str) -> None:
    # ValueError (embedded null byte) and UnicodeEncodeError came out of Path.read_text.
    with pytest.raises(InvalidInput, match="agent file"):
        load_agent_file(name)
    with pytest.raises(InvalidInput, match="schema"):
        load_schema(name)
    with pytest.raises(InvalidInput, match="image"):
        load_image(name.replace(".toml", ".png"))
    with pytest.raises(InvalidInput, match="config file"):
        load_config(Path(name))


@pytest.mark.parametrize(
    "data", [b"[" * 100_000, b'{"type": NaN}', b"\xff"], ids=["deep", "NaN", "not UTF-8"]
)
def test_a_schema_file_json_cannot_hold_is_invalid_input(tmp_path: Path, data: bytes) -> None:
    # RecursionError came out of json.loads; NaN was read as a float and sent on as a schema value.
    with pytest.raises(InvalidInput):
        load_schema(str(_write(str(tmp_path), "s.json", data)))


def test_a_file_with_no_end_is_refused_not_read_until_memory_runs_out() -> None:
    with pytest.raises(InvalidInput, match="capped at 16 MB"):
        load_agent_file("/dev/zero")
