"""``steadyloop run "prompt"``: one prompt, the answer streamed to stdout, tools run between turns.

Thinking is hidden unless ``--show-thinking`` (then it goes to stderr, dim), so stdout carries only the
answer and pipes cleanly. ``--json`` writes every event as a JSON line instead; ``--output-schema`` holds the
answer to a JSON Schema and prints the parsed object.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..messages import ImagePart
from .approvals import TerminalApprovals, open_terminal
from .config import Resolved, with_model
from .files import read_named_bytes, read_named_text
from .kit import AgentOptions, open_conversation
from .render import JsonRenderer, TextRenderer, to_json_line

__all__ = ["Interrupted", "check_schema", "load_image", "read_prompt", "run"]

_IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_IMAGE_CAP = 5 * 1024 * 1024


class Interrupted(Exception):
    """Ctrl-C stopped the command."""


def read_prompt(words: Sequence[str], stdin: Any) -> str:
    """The prompt: the arguments, then whatever was piped in, joined by a blank line.

    Raises:
        InvalidInput: there is neither.
    """
    parts = [" ".join(words).strip()] if words else []
    if stdin is not None and not stdin.isatty():
        piped = stdin.read().strip()
        if piped:
            parts.append(piped)
    prompt = "\n\n".join(p for p in parts if p)
    if not prompt:
        raise InvalidInput('no prompt: give one as an argument (steadyloop run "...") or pipe it in')
    return prompt


def load_image(path: str) -> ImagePart:
    """An image file as an inline part.

    Raises:
        InvalidInput: not a png, jpeg, gif or webp file, missing, or over 5 MB.
    """
    file = Path(path)
    mime = _IMAGE_TYPES.get(file.suffix.lower())
    if mime is None:
        raise InvalidInput(f"{path}: images must be .png, .jpg, .jpeg, .gif or .webp")
    data = read_named_bytes(file, "image", limit=_IMAGE_CAP)
    return ImagePart.from_bytes(data, mime)


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is no JSON number")


def load_schema(path: str) -> dict[str, Any]:
    """A JSON Schema file as the ``response_format`` that holds the answer to it."""
    text = read_named_text(path, "schema")
    try:
        schema = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"{path} is not JSON a schema can be: nested too deep") from None
    if not isinstance(schema, dict):
        raise InvalidInput(f"{path}: a JSON Schema is an object")
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": True}}


_TYPES: Mapping[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_schema(value: Any, schema: Mapping[str, Any], where: str = "$") -> None:
    """Check ``value`` against the parts of JSON Schema a structured answer uses.

    Checked: ``type``, ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties: false``,
    ``items``. The server's own constrained decoding enforces the rest.

    Raises:
        InvalidInput: the value breaks the schema; the message says where.
    """
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        ok = any(
            isinstance(value, _TYPES.get(k, ()))
            and not (k in ("integer", "number") and isinstance(value, bool))
            for k in names
        )
        if not ok:
            raise InvalidInput(f"the answer does not fit the schema: {where} should be {' or '.join(names)}")
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidInput(f"the answer does not fit the schema: {where} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        raise InvalidInput(f"the answer does not fit the schema: {where} should be {schema['const']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                raise InvalidInput(f"the answer does not fit the schema: {where} lacks {key!r}")
        for key, item in value.items():
            if key in properties:
                check_schema(item, properties[key], f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                raise InvalidInput(f"the answer does not fit the schema: {where} has no field {key!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            check_schema(item, schema["items"], f"{where}[{i}]")


def parse_answer(text: str, schema: Mapping[str, Any]) -> Any:
    """The answer as the object the schema asked for.

    Raises:
        InvalidInput: it is not JSON, or does not fit.
    """
    body = text.strip()
    if body.startswith("```"):  # a model that wraps its JSON in a fence anyway
        body = body.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        shown = body if len(body) <= 60 else body[:59] + "…"
        raise InvalidInput(f"the answer is not valid JSON ({exc.msg}): {shown!r}") from exc
    check_schema(value, schema)
    return value


async def _tick(renderer: TextRenderer) -> None:
    while True:
        await asyncio.sleep(1.0)
        renderer.tick()


async def run(
    resolved: Resolved,
    options: AgentOptions,
    prompt: str,
    *,
    images: Sequence[ImagePart] = (),
    as_json: bool = False,
    show_thinking: bool = False,
    quiet: bool = False,
) -> int:
    """Run one prompt; returns the exit code.

    Notices (retries, downgrades, recoveries, how long the model has been reading the prompt) go to stderr,
    one line each, whether or not it is a terminal; ``quiet`` leaves them out.

    Raises:
        Interrupted: Ctrl-C stopped it.
        SteadyloopError: it failed (the caller prints the one line).
    """
    resolved = await with_model(resolved)
    terminal = open_terminal() if options.tools or options.mcp else None
    approvals = TerminalApprovals(terminal)
    loop = asyncio.get_running_loop()
    interrupted = False
    ticking: asyncio.Task[None] | None = None
    try:
        async with open_conversation(resolved, options, approvals=approvals) as conversation:
            agent = conversation.agent
            if as_json:
                agent.subscribe(JsonRenderer(sys.stdout))
            else:
                renderer = TextRenderer(
                    sys.stdout,
                    sys.stderr,
                    show_thinking=show_thinking,
                    show_answer=options.response_format is None,
                    notices=not quiet,
                )
                agent.subscribe(renderer)
                ticking = asyncio.create_task(_tick(renderer))

            def on_sigint() -> None:
                # Ctrl-C at an approval question is a no to that call; anywhere else it stops the run.
                nonlocal interrupted
                if approvals.asking:
                    approvals.interrupt()
                    return
                interrupted = True
                agent.abort()

            loop.add_signal_handler(signal.SIGINT, on_sigint)
            try:
                turn = await conversation.prompt(prompt, images)
            except Exception:
                if interrupted:
                    raise Interrupted() from None
                raise
            finally:
                loop.remove_signal_handler(signal.SIGINT)
    finally:
        if ticking is not None:
            ticking.cancel()
        if terminal is not None:
            terminal.close()
    if options.response_format is not None:
        value = parse_answer(turn.content, options.response_format["json_schema"]["schema"])
        if not as_json:
            print(to_json_line(value), flush=True)
    return 0
