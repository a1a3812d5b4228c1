"""The ``steadyloop`` command line: arguments, dispatch, and the one-line errors.

``steadyloop "prompt"`` is short for ``steadyloop run "prompt"``: when the first argument is not a command
name, ``run`` is assumed (so a prompt that is exactly ``chat`` needs ``steadyloop run chat``). Any failure
ends in one line on stderr, ``steadyloop: error: ...``, and a non-zero exit; Ctrl-C exits with 130.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from .. import __version__
from ..errors import (
    EndpointUnavailable,
    EndpointUnreachable,
    MissingApiKey,
    RunCancelled,
    RunError,
    SteadyloopError,
)
from ..providers import PROVIDERS
from ..spec import AgentSpec
from ..tools import EFFECT_CLASSES
from . import flag_values as flags
from .config import BUNDLED, PRESETS, EndpointChoice, Resolved, config_path, load_config, resolve, with_model
from .kit import AgentOptions
from .render import one_line

__all__ = ["MAX_OPTIONS", "build_parser", "main", "parse_argv"]

COMMANDS = ("run", "chat", "sessions", "models", "local", "serve")
_STDERR_LINES = 20
#: The most option words one command line may hold. argparse finds each option's end by scanning the
#: positions of all of them, so its time grows with their square: 25,600 ``--mcp`` flags took 10 s of CPU.
MAX_OPTIONS = 1_000

_EPILOG = """\
Endpoints, first match wins: --provider NAME[:MODEL][,...] (a provider, or a failover chain);
--base-url; -e NAME (an endpoint of the config file, or a preset: {presets});
STEADYLOOP_FAILOVER or STEADYLOOP_PROVIDER; OPENAI_BASE_URL; the config file's default; else the
bundled local model (started on first use). Config file: {config}. Keys: --api-key, OPENAI_API_KEY, or api_key_env.
--api anthropic|gemini speaks that provider's own wire (its service unless --base-url names another).
The model: -m, STEADYLOOP_MODEL, the endpoint's configured model, or the first it lists.

'steadyloop "prompt"' is short for 'steadyloop run "prompt"'."""


def _endpoint_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("endpoint")
    group.add_argument(
        "-e", "--endpoint", metavar="NAME", help="a named endpoint from the config file, or a preset"
    )
    group.add_argument("--local-preset", choices=sorted(PRESETS), help="a local server on its default port")
    group.add_argument(
        "--base-url", metavar="URL", help="an OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1"
    )
    group.add_argument(
        "--provider",
        metavar="NAME[:MODEL][,...]",
        help=f"a provider ({', '.join(sorted(PROVIDERS))}) at its default URL with <NAME>_API_KEY, "
        "or a failover chain of them",
    )
    group.add_argument("--api-key", metavar="KEY", help="the API key (default: $OPENAI_API_KEY)")
    group.add_argument(
        "--api",
        choices=("openai", "anthropic", "gemini"),
        help="the wire format: chat completions (default), Anthropic Messages or Gemini; without "
        "--base-url, the provider's own service (key from $ANTHROPIC_API_KEY / $GEMINI_API_KEY)",
    )
    group.add_argument(
        "-m", "--model", metavar="MODEL", help="the model (default: $STEADYLOOP_MODEL, or ask)"
    )
    return parent


def _agent_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("agent")
    group.add_argument("--system", metavar="TEXT", help="the system prompt")
    group.add_argument("--max-turns", type=flags.count, metavar="N", help="requests one prompt may make")
    group.add_argument(
        "-c", "--continue", dest="resume_latest", action="store_true", help="resume the latest session"
    )
    group.add_argument("--session", metavar="ID", help="resume this session")
    group.add_argument(
        "--store",
        metavar="URL|FILE",
        help="the session store: postgresql://... or a SQLite file (default $STEADYLOOP_STORE, else the CLI's)",
    )
    group.add_argument("--no-tools", action="store_true", help="no file or shell tools")
    group.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar='"COMMAND ARGS"',
        help="attach an MCP server (repeatable)",
    )
    group.add_argument(
        "--tool-routing",
        choices=["auto", "on", "off"],
        default="auto",
        help="ask each step as one tool's call or an answer, held to a schema (auto: on for the bundled "
        "models, too small to choose well otherwise)",
    )
    group.add_argument(
        "--tool-gate",
        choices=["on", "off"],
        default="on",
        help="with tool routing, ask 'tool or answer?' first as a short question of its own (default: on)",
    )
    group.add_argument(
        "--idle",
        type=flags.seconds,
        metavar="SECONDS",
        help="a bundled server started now stops after this long without a request (0 = never; "
        "default $STEADYLOOP_LOCAL_IDLE or 900)",
    )
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no notices or progress on stderr, only errors"
    )
    group.add_argument("--think", metavar="LEVEL", help="reasoning effort: none, low, medium, high, or off")
    group.add_argument("--max-tokens", type=flags.count, metavar="N", help="the reply ceiling")
    group.add_argument("--temperature", type=flags.temperature, metavar="T", help="sampling temperature")
    group.add_argument(
        "--agent", metavar="FILE", help="an agent spec document (TOML, or .json); the flags above override it"
    )
    group.add_argument(
        "--trust-bundle", action="store_true", help="run the MCP servers the --agent document bundles"
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every command."""
    endpoint, agent = _endpoint_options(), _agent_options()
    parser = argparse.ArgumentParser(
        prog="steadyloop",
        description="Run and chat with an agent against any OpenAI-compatible endpoint.",
        epilog=_EPILOG.format(
            presets=", ".join(f"{k} :{v}" for k, v in PRESETS.items()), config=config_path()
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"steadyloop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run", parents=[endpoint, agent], help="answer one prompt (stdin is read when piped)"
    )
    run.add_argument("prompt", nargs="*", help="the prompt; piped stdin is added after it")
    run.add_argument("--json", action="store_true", help="print every event as a JSON line")
    run.add_argument(
        "--output-schema", metavar="FILE", help="hold the answer to this JSON Schema; print the object"
    )
    run.add_argument(
        "--image", action="append", default=[], metavar="FILE", help="attach an image (repeatable)"
    )
    run.add_argument("--show-thinking", action="store_true", help="show the model's thinking on stderr")

    chat = sub.add_parser("chat", parents=[endpoint, agent], help="talk interactively")
    chat.add_argument("--hide-thinking", action="store_true", help="do not show the model's thinking")

    sessions = sub.add_parser(
        "sessions",
        help="list, show, export or delete saved sessions (one whose last run gave no answer is marked [failed])",
    )
    sessions.add_argument("action", choices=["list", "show", "export", "delete"], nargs="?", default="list")
    sessions.add_argument("session_id", nargs="?", metavar="ID")
    sessions.add_argument(
        "--store", metavar="URL|FILE", help="the session store (default $STEADYLOOP_STORE, else the CLI's)"
    )

    sub.add_parser("models", parents=[endpoint], help="what the endpoint serves")

    local = sub.add_parser(
        "local",
        help="the bundled local model: up, down, status, build",
        description="The bundled local model's server. One the CLI starts stops by itself after "
        "$STEADYLOOP_LOCAL_IDLE seconds without a request (default 900; 0 = never). It runs on the prebuilt "
        "engine until `build` compiles llama.cpp's llama-server for this CPU (about 6 min on 2 cores, once; "
        "prompt reading about a quarter faster), and on that from then on.",
    )
    local.add_argument("action", choices=["up", "down", "status", "build"])
    which = local.add_mutually_exclusive_group()
    which.add_argument(
        "--port", type=flags.port(1), metavar="N", help="up: listen on this port; down: stop the server on it"
    )
    which.add_argument(
        "--all", dest="every", action="store_true", help="down: every server, also those started elsewhere"
    )
    local.add_argument(
        "--idle",
        type=flags.seconds,
        metavar="SECONDS",
        help="up: stop after this long without a request (0 = never)",
    )
    local.add_argument(
        "--ctx", type=flags.count, metavar="N", help="up: the context size in tokens (default 4096)"
    )
    local.add_argument(
        "--no-key",
        action="store_true",
        help="up: serve requests without the server's key: anyone who reaches the port (another user of "
        "this machine, a web page in your browser) can then use it",
    )
    local.add_argument(
        "--template",
        choices=["jsonblock", "think", "stock"],
        help="up: the chat template (default jsonblock, under which tool calls parse)",
    )
    from ..local import MODELS

    local.add_argument(
        "--model",
        choices=sorted(MODELS),
        help="up: the model (default: $STEADYLOOP_LOCAL_MODEL, else qwen-1.5b; qwen, the 0.5B one, is "
        "0.5 GB and twice as fast, and uses tools worse)",
    )
    local.add_argument("-q", "--quiet", action="store_true", help="up, build: no progress on stderr")
    _serve_parser(sub, endpoint)
    return parser


def _serve_parser(sub: Any, endpoint: argparse.ArgumentParser) -> None:
    serve = sub.add_parser(
        "serve", parents=[endpoint], help="the HTTP API and web page (needs the server extra)"
    )
    serve.add_argument(
        "--host", type=flags.host, default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=flags.port(0), default=8765, help="port (default 8765; 0: any free one)"
    )
    serve.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="NAME=TOKEN",
        help="a bearer token and whose sessions it opens (repeatable; also $STEADYLOOP_SERVER_TOKENS)",
    )
    serve.add_argument(
        "--workdir",
        type=flags.path_text,
        default=".",
        metavar="DIR",
        help="the file tools' folder (default .)",
    )
    serve.add_argument("--no-tools", action="store_true", help="offer sessions no tools")
    serve.add_argument("--allow-shell", action="store_true", help="offer the shell tool too")
    serve.add_argument(
        "--store",
        metavar="URL|FILE",
        help="the session store: postgresql://... shared by several nodes, or a SQLite file "
        "(default $STEADYLOOP_STORE, else the CLI's)",
    )
    serve.add_argument(
        "--node",
        type=flags.name,
        metavar="NAME",
        help="this node's name among nodes sharing a store (default host:port)",
    )
    serve.add_argument(
        "--max-runs", type=flags.count, default=16, metavar="N", help="runs one token may have going (16)"
    )
    serve.add_argument("--agent", metavar="FILE", help="an agent document under every session's settings")
    serve.add_argument(
        "--transport",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
        help="how the model's streams are read: aiohttp (default; the fastest with many runs at once) "
        "or httpx (through the official SDK's httpx2 client); both raise the same errors",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        type=flags.host,
        metavar="NAME",
        help="a host name requests may address the server by beyond localhost (repeatable; '*': any; "
        "also [serve] allow_hosts in the config file)",
    )
    serve.add_argument(
        "--require-approval",
        action="append",
        choices=(*EFFECT_CLASSES, "none"),
        metavar="EFFECT",
        help="an effect whose calls wait for an approval (repeatable; default: every effect but read; "
        "'none': no effect); sessions may add to it, never remove",
    )
    serve.add_argument(
        "--approval-timeout",
        type=flags.seconds,
        metavar="SECONDS",
        help="how long an approval may take before the call is denied (default 300); sessions may "
        "shorten it, never lengthen it",
    )
    serve.add_argument(
        "--durable",
        action="store_true",
        help="runs survive this node's death: another node resumes them (PostgreSQL store, 'durable' extra)",
    )


def _serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .serve import check_open_bind, parse_tokens, serve_command, serve_floor

    tokens = parse_tokens(args.token)
    check_open_bind(args.host, tokens)
    floor = serve_floor(
        load_config(config_path()),
        allow_hosts=args.allow_host,
        require_approval=args.require_approval,
        approval_timeout=args.approval_timeout,
    )
    spec = None
    if args.agent is not None:
        from .agent_file import load_agent_file

        spec = load_agent_file(args.agent)
    return serve_command(
        _resolve(args, spec),  # the document's provider and failover, unless the flags name an endpoint
        host=args.host,
        port=args.port,
        tokens=tokens,
        workdir=Path(args.workdir).resolve(),
        tools=not args.no_tools,
        allow_shell=args.allow_shell,
        store=_store_of(args),
        node=args.node,
        spec=spec,
        max_runs=args.max_runs,
        transport="httpx2" if args.transport == "httpx" else "aiohttp",
        durable=args.durable,
        floor=floor,
    )


def _with_shorthand(argv: list[str], stdin_piped: bool) -> list[str]:
    if not argv:
        return ["run"] if stdin_piped else []
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "-V", "--version"):
        return argv
    return ["run", *argv]


def _resolve(args: argparse.Namespace, spec: AgentSpec | None = None) -> Resolved:
    from .commands import LocalChoice, bundled_server

    choice = EndpointChoice(
        name=args.local_preset or args.endpoint,
        base_url=args.base_url,
        api_key=args.api_key,
        model=args.model,
        provider=args.provider,
        api=getattr(args, "api", None),
    )
    local = LocalChoice(idle=getattr(args, "idle", None))  # a finite number of seconds (flags.seconds)
    quiet = bool(getattr(args, "quiet", False))
    if spec is not None:
        from .agent_file import resolve_for_agent

        return resolve_for_agent(spec, choice, start_local=lambda: bundled_server(local, quiet=quiet))
    return resolve(choice, start_local=lambda: bundled_server(local, quiet=quiet))


def _spec_of(args: argparse.Namespace) -> AgentSpec | None:
    if args.agent is None:
        return None
    from .agent_file import load_agent_file

    return load_agent_file(args.agent, trust_bundle=args.trust_bundle)


def _agent_options_of(
    args: argparse.Namespace,
    resolved: Resolved,
    response_format: dict[str, Any] | None = None,
    spec: AgentSpec | None = None,
) -> AgentOptions:
    routing = {"on": True, "off": False}.get(args.tool_routing, resolved.label == BUNDLED)
    temperature = args.temperature
    if temperature is None and resolved.label == BUNDLED:
        from ..local import temperature_for

        temperature = temperature_for(resolved.model)
    return AgentOptions(
        tool_routing=routing,
        tool_gate=args.tool_gate == "on",
        system=args.system,
        tools=not args.no_tools,
        mcp=tuple(args.mcp),
        think=args.think,
        max_tokens=args.max_tokens,
        temperature=temperature,
        max_turns=args.max_turns,
        session=args.session,
        resume_latest=args.resume_latest,
        store=_store_of(args),
        response_format=response_format,
        spec=spec,
    )


def _store_of(args: argparse.Namespace) -> str | None:
    """The session store ``--store`` or ``$STEADYLOOP_STORE`` names; ``None`` for the default file."""
    return getattr(args, "store", None) or os.environ.get("STEADYLOOP_STORE") or None


def _run_async(job: Coroutine[Any, Any, int]) -> int:
    async def closing() -> int:
        from .. import aclose_clients

        try:
            return await job
        finally:
            await aclose_clients()

    return asyncio.run(closing())


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        from .run import load_image, load_schema, read_prompt, run

        prompt = read_prompt(args.prompt, sys.stdin)
        images = [load_image(path) for path in args.image]
        schema = load_schema(args.output_schema) if args.output_schema else None
        spec = _spec_of(args)
        resolved = _resolve(args, spec)
        return _run_async(
            run(
                resolved,
                _agent_options_of(args, resolved, schema, spec),
                prompt,
                images=images,
                as_json=args.json,
                show_thinking=args.show_thinking,
                quiet=args.quiet,
            )
        )
    if args.command == "chat":
        from .chat import chat

        spec = _spec_of(args)
        resolved = _resolve(args, spec)
        return chat(
            resolved, _agent_options_of(args, resolved, spec=spec), show_thinking=not args.hide_thinking
        )
    if args.command == "sessions":
        from .commands import sessions

        return _run_async(sessions(args.action, args.session_id, store=_store_of(args)))
    if args.command == "models":
        from .commands import models

        async def listing() -> int:
            return await models(await with_model(_resolve_no_model(args)))

        return _run_async(listing())
    if args.command == "serve":
        return _serve(args)
    from .commands import local_command

    return local_command(
        args.action,
        port=args.port,
        every=args.every,
        idle=args.idle,
        ctx=args.ctx,
        template=args.template,
        quiet=args.quiet,
        model=args.model,
        keyless=args.no_key,
    )


def _resolve_no_model(args: argparse.Namespace) -> Resolved:
    # Listing models needs no model named; a placeholder keeps discovery from asking twice.
    resolved = _resolve(args)
    return (
        resolved
        if resolved.model
        else Resolved(resolved.endpoint, "-", resolved.label, resolved.context_length)
    )


def _error(text: str) -> None:
    print(f"steadyloop: error: {text}", file=sys.stderr, flush=True)


def _hint(exc: SteadyloopError) -> str:
    if isinstance(exc, MissingApiKey):
        return f"no API key for {exc.endpoint}: set {' or '.join(exc.variables)} (or pass --api-key)"
    if isinstance(exc, EndpointUnreachable) and exc.problem and exc.connection in _FIXES:
        stopped = "the run stopped: " if isinstance(exc, RunError) else ""
        fix = _FIXES[exc.connection]
        if exc.connection == "refused" and exc.host in ("127.0.0.1", "localhost", "::1"):
            fix += " (or start the bundled model: steadyloop local up)"
        return f"{stopped}{exc.problem} — {fix}"
    text = one_line(exc)
    # A run that stopped carries the endpoint's failure as its cause; the hint is about that failure.
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, EndpointUnavailable):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, EndpointUnavailable) and cause.endpoint and cause.status is None:
        text += (
            f" (is a server running at {cause.endpoint}? Point at one with --base-url or OPENAI_BASE_URL, "
            "or start the bundled model: steadyloop local up)"
        )
    return text


# What the command's user can do about a connection that cannot succeed as things stand, in its own flags.
_FIXES = {
    "refused": "start the server or check --base-url",
    "dns": "check the host in --base-url",
    "tls": "if its certificate comes from your own authority, set SSL_CERT_FILE to that authority's "
    "certificate; else check --base-url",
}


def _own_words(exc: BaseException) -> None:
    """What a failed MCP server wrote to stderr, after the one-line error: the reason is usually there."""
    stderr = getattr(exc, "stderr", "")
    if isinstance(stderr, str) and stderr.strip():
        lines = stderr.strip().splitlines()[-_STDERR_LINES:]
        print("\n".join(f"  | {line}" for line in lines), file=sys.stderr, flush=True)


def parse_argv(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed, after refusing one with more option words than ``MAX_OPTIONS``.

    Raises:
        SystemExit: argparse's usage error (exit code 2, the reason on stderr).
    """
    options = 0
    for word in argv:
        if word == "--":
            break
        options += word.startswith("-") and word != "-"
    if options > MAX_OPTIONS:
        parser.error(f"too many options ({options}); a command line takes at most {MAX_OPTIONS}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``steadyloop`` command; returns the exit code."""
    from .run import Interrupted

    given = list(sys.argv[1:] if argv is None else argv)
    piped = sys.stdin is not None and not sys.stdin.isatty()
    parser = build_parser()
    args = parse_argv(parser, _with_shorthand(given, piped))
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return _dispatch(args)
    except (KeyboardInterrupt, Interrupted, RunCancelled):
        _error("interrupted")
        return 130
    except SteadyloopError as exc:
        _error(_hint(exc))
        _own_words(exc)
        return 1
    except BrokenPipeError:
        # The reader went away (``| head``); stdout cannot take even the error, and nothing is owed.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # the last line of defence: one line, never a traceback
        if os.environ.get("STEADYLOOP_DEBUG"):
            raise
        _error(f"{type(exc).__name__}: {one_line(exc)}")
        return 1
