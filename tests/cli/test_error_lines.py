"""The command's one error line names the cause and the fix: nothing listening, no such host, a web page
where an API should be, a provider without its key; and it waits for the model only once a request is out.

Every command runs with ``HTTPS_PROXY`` and ``HTTP_PROXY`` at a closed loopback port, so a request that
should never be sent could not leave the machine even if it were.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from steadyloop.testing import Reply, ScriptedServer, stream_of

APACHE_404 = (
    '<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head>\n<title>404 Not Found</title>\n'
    "</head><body>\n<h1>Not Found</h1>\n</body></html>\n"
)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def sealed(env: dict[str, str]) -> dict[str, str]:
    dead = f"http://127.0.0.1:{closed_port()}"
    env.update(HTTPS_PROXY=dead, HTTP_PROXY=dead, NO_PROXY="127.0.0.1,localhost")
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY"):
        env.pop(name, None)
    return env


def error_lines(done: Any) -> list[str]:
    assert done.returncode == 1, done.stderr
    return done.stderr.strip().splitlines()


@pytest.mark.parametrize("model", [["-m", "m"], []])  # a turn, and the model listing before it
def test_nothing_listening_is_said_at_once_with_the_fix(
    piped: Callable[..., Any], sealed: dict[str, str], model: list[str]
) -> None:
    port = closed_port()
    lines = error_lines(piped("run", "--base-url", f"http://127.0.0.1:{port}/v1", *model, "hi"))
    stopped = "the run stopped: " if model else ""
    assert lines == [
        f"steadyloop: error: {stopped}nothing listens on 127.0.0.1:{port} — start the server or check "
        "--base-url (or start the bundled model: steadyloop local up)"
    ]  # no retries, no "the model is reading the prompt"


@pytest.mark.parametrize("model", [["-m", "m"], []])
def test_a_host_that_does_not_resolve(
    piped: Callable[..., Any], sealed: dict[str, str], model: list[str]
) -> None:
    sealed.pop("HTTP_PROXY")  # the name must be looked up, not handed to a proxy
    lines = error_lines(piped("run", "--base-url", "http://steadyloop-test.invalid/v1", *model, "hi"))
    assert lines[-1].endswith("cannot resolve host steadyloop-test.invalid — check the host in --base-url")
    assert len(lines) == 1


def test_a_web_page_says_its_status_and_that_it_is_no_api(
    piped: Callable[..., Any], sealed: dict[str, str]
) -> None:
    page = Reply.raw(APACHE_404, 404, {"Content-Type": "text/html"})
    with ScriptedServer.in_thread(page) as server:
        lines = error_lines(piped("run", "--base-url", server.base_url, "-m", "m", "hi"))
    assert lines == [
        'steadyloop: error: the run stopped: HTTP 404: the URL served a web page, not an API ("404 Not Found"): '
        "check the base URL (an OpenAI-compatible one usually ends in /v1), or a proxy in the way"
    ]


@pytest.mark.parametrize(
    ("provider", "variables"),
    [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY or GOOGLE_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
    ],
)
def test_a_provider_without_its_key_names_the_variable_before_sending(
    piped: Callable[..., Any], sealed: dict[str, str], provider: str, variables: str
) -> None:
    lines = error_lines(piped("run", "--provider", provider, "-m", "some-model", "hi"))
    assert len(lines) == 1 and lines[0].startswith("steadyloop: error: no API key for https://")
    assert lines[0].endswith(f": set {variables} (or pass --api-key)")


def test_a_key_from_the_flag_or_a_url_of_ones_own_needs_no_variable(
    piped: Callable[..., Any], sealed: dict[str, str]
) -> None:
    with ScriptedServer.in_thread(Reply.stream(stream_of(text="proxied"))) as server:
        done = piped("run", "--provider", "openai", "--base-url", server.base_url, "-m", "m", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "proxied"


def test_the_wait_for_the_model_is_shown_once_the_request_is_out(
    piped: Callable[..., Any], sealed: dict[str, str]
) -> None:
    # Headers held back for 3 s, as llama-server did while it read a prompt: the request is out, so the wait
    # is the model's, and is said.
    slow = Reply.stream(stream_of(text="read it"), headers_delay=3.0)
    with ScriptedServer.in_thread(slow) as server:
        done = piped("run", "--base-url", server.base_url, "-m", "m", "hi")
    assert done.returncode == 0, done.stderr
    assert "· the model is reading the prompt…" in done.stderr.splitlines()
    assert done.stdout.strip() == "read it"
