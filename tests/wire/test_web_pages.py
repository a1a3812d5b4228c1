"""An HTML page where an API's answer should be: the status it came with, that a web page answered, and
what the page says, never its first line of markup."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.errors import EndpointError, EndpointRefused, EndpointUnavailable
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.failures import Failure
from steadyloop.wire.transport.clients import configure_clients, get_chat_client
from steadyloop.wire.web_pages import is_web_page, page_words
from steadyloop.wire.windows import list_models

# Apache's own 404 page, as it serves it.
APACHE_404 = (
    '<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">\n<html><head>\n<title>404 Not Found</title>\n'
    "</head><body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this server.</p>\n"
    "</body></html>\n"
)
# nginx's 502 page, as it serves it.
NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
LOGIN_WALL = (
    "<!doctype html><html><head><script>var model = 'loading'; // context length exceeded</script>"
    "<style>h1 {color: red}</style></head><body><h1>Sign in &amp; continue</h1></body></html>"
)


@pytest.mark.parametrize(
    ("text", "page"),
    [
        (APACHE_404, True),
        (NGINX_502, True),
        (LOGIN_WALL, True),
        ("\ufeff  <!DOCTYPE html><p>x", True),
        ("<html>Bad Gateway</html>", True),
        ('{"error": {"message": "<html> is not a model"}}', False),
        ("data: {}\n\n", False),
        ("upstream connect error", False),
        ('<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>', False),
        ("", False),
    ],
)
def test_a_web_page_is_told_from_an_apis_answer(text: str, page: bool) -> None:
    assert is_web_page(text) is page


def test_a_page_says_its_title_else_its_heading_else_its_text() -> None:
    assert page_words(APACHE_404) == "404 Not Found"
    assert page_words(NGINX_502) == "502 Bad Gateway"
    assert page_words(LOGIN_WALL) == "Sign in & continue"  # scripts and styles are no words
    assert page_words("<html>Bad  Gateway\n</html>") == "Bad Gateway"
    assert page_words("<html><body></body></html>") == ""


@given(st.text(max_size=3000))
def test_any_text_gives_short_words_without_markup(text: str) -> None:
    words = page_words("<html>" + text)
    assert len(words) <= 200 and "\n" not in words


@pytest.mark.parametrize(
    ("status", "page", "kind", "said"),
    [
        (404, APACHE_404, "not_found", "404 Not Found"),
        (502, NGINX_502, "transient", "502 Bad Gateway"),
        (401, LOGIN_WALL, "auth", "Sign in & continue"),
        (400, LOGIN_WALL, "invalid_request", "Sign in & continue"),  # the script's words match no rule
    ],
)
def test_classify_failure_reads_a_page_for_what_it_says(status: int, page: str, kind: str, said: str) -> None:
    failure = sl.classify_failure(status, page)
    assert (failure.kind, failure.status, failure.message, failure.web_page) == (kind, status, said, True)
    assert not sl.classify_failure(status, {"error": {"message": "nope"}}).web_page


def test_a_failure_keeps_its_page_mark_through_json_and_reads_older_json() -> None:
    failure = sl.classify_failure(404, APACHE_404)
    assert Failure.from_json(json.loads(json.dumps(failure.to_json()))) == failure
    older = {k: v for k, v in failure.to_json().items() if k != "web_page"}
    assert Failure.from_json(older).web_page is False
    with pytest.raises(sl.InvalidInput):
        Failure.from_json({**failure.to_json(), "web_page": "yes"})


Transport = Literal["httpx2", "aiohttp"]


@pytest.mark.parametrize("transport", ["httpx2", "aiohttp"])
@pytest.mark.parametrize(
    ("status", "page", "error_type", "said"),
    [
        (404, APACHE_404, EndpointRefused, '("404 Not Found")'),
        (502, NGINX_502, EndpointUnavailable, '("502 Bad Gateway")'),
    ],
)
async def test_a_turn_answered_with_a_page_says_the_status_and_that_a_page_answered(
    transport: Transport, status: int, page: str, error_type: type[EndpointError], said: str
) -> None:
    configure_clients(transport=transport)
    async with ScriptedServer(Reply.raw(page, status, {"Content-Type": "text/html"})) as server:
        with pytest.raises(error_type) as caught:
            await get_chat_client(Endpoint(server.base_url)).open_stream(
                {"model": "m", "messages": []}, connect_timeout=5
            )
    message = str(caught.value)
    assert message.startswith(
        f"HTTP {status}: the URL served a web page, not an API {said}: check the base URL"
    )
    assert "<" not in message and caught.value.status == status


@pytest.mark.parametrize("transport", ["httpx2", "aiohttp"])
async def test_a_listing_answered_with_a_page_says_so(transport: Transport) -> None:
    configure_clients(transport=transport)
    async with ScriptedServer(models=Reply.raw(APACHE_404, 404, {"Content-Type": "text/html"})) as server:
        with pytest.raises(EndpointRefused) as caught:
            await list_models(Endpoint(server.base_url))
    assert str(caught.value) == (
        f'{server.base_url}/models: HTTP 404: the URL served a web page, not an API ("404 Not Found"): '
        "check the base URL (an OpenAI-compatible one usually ends in /v1), or a proxy in the way"
    )
