"""Which requests the server takes, as decisions over header values: Host, Origin, forwarding, body type."""

from __future__ import annotations

from ipaddress import ip_address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop import InvalidInput
from steadyloop.server.guard import (
    STATE_CHANGING,
    allowed_host_entry,
    foreign_origin,
    forwarded_by,
    host_allowed,
    is_json,
    split_host,
)
from steadyloop.server.settings import is_local

LOOPBACK_HOSTS = [
    "localhost",
    "localhost:8765",
    "LocalHost:1",
    "localhost.:8765",
    "app.localhost:3000",
    "127.0.0.1",
    "127.0.0.1:80",
    "127.8.9.1:8765",
    "[::1]",
    "[::1]:8765",
]
FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:8765",
    "localhost.evil.example",
    "127.0.0.1.nip.io:8765",
    "localhostx:8765",
    "[::2]:8765",
    "0.0.0.0:8765",
    "10.0.0.5:8765",
    "",
    ":8765",
    "localhost:99999",
    "localhost:0",
    "user@localhost",
    "localhost:8765/path",
    "localhost 8765",
    "[::1",
    "[zz::1]",
    ".localhost",
]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_a_loopback_name_is_answered_on_any_port(host: str) -> None:
    assert host_allowed(host)


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_any_other_host_is_refused(host: str) -> None:
    assert not host_allowed(host)
    assert not host_allowed(host, ["agents.example.com"])


def test_an_operator_allows_names_and_addresses_and_star_allows_any() -> None:
    allowed = [allowed_host_entry(h) for h in ("Agents.Example.com", "10.0.0.5", "[FD00::5]")]
    assert allowed == ["agents.example.com", "10.0.0.5", "[fd00::5]"]
    for host in ("agents.example.com", "AGENTS.example.com:443", "10.0.0.5:8765", "[fd00::5]:1"):
        assert host_allowed(host, allowed), host
    assert not host_allowed("evil.example", allowed)
    assert not host_allowed("sub.agents.example.com", allowed)
    assert host_allowed("evil.example:8765", ["*"])
    assert not host_allowed("not a host", ["*"]), "a Host that is no host is refused whatever is allowed"
    assert not host_allowed(None, ["*"])
    for bad in ("http://agents.example.com", "agents.example.com:443", "*.example.com", "a/b", ""):
        with pytest.raises(InvalidInput, match="without scheme, port or path"):
            allowed_host_entry(bad)


names = st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}(\.[a-z0-9][a-z0-9-]{0,20}){0,3}", fullmatch=True)


@given(names, st.none() | st.integers(1, 65535))
def test_a_host_reads_back_as_its_name_and_port(name: str, port: int | None) -> None:
    text = name if port is None else f"{name}:{port}"
    assert split_host(text) == (name, port)
    assert split_host(text.upper()) == (name, port)


@given(st.text(max_size=80))
def test_any_text_as_a_host_is_read_without_raising_and_taken_only_as_loopback(text: str) -> None:
    if host_allowed(text):
        parsed = split_host(text)
        assert parsed is not None
        name = parsed[0]
        assert name == "localhost" or name.endswith(".localhost") or ip_address(name.strip("[]")).is_loopback


@given(names.filter(lambda n: n != "localhost" and not n.endswith(".localhost")), st.integers(1, 65535))
def test_a_rebinding_name_is_refused_on_any_port(name: str, port: int) -> None:
    if not all(part.isdigit() for part in name.split(".")):  # a name, not an address
        assert not host_allowed(f"{name}:{port}")


ORIGINS: list[tuple[str, str | None, str | None, bool]] = [
    # (Host, Origin, Referer, refused)
    ("127.0.0.1:8765", None, None, False),  # curl, the SDKs: no page at all
    ("127.0.0.1:8765", "http://127.0.0.1:8765", None, False),
    ("127.0.0.1:8765", None, "http://127.0.0.1:8765/", False),
    ("127.0.0.1:8765", None, "http://127.0.0.1:8765/some/page?x=1#y", False),
    ("localhost:8765", "http://LOCALHOST:8765", None, False),
    ("agents.example.com", "https://agents.example.com", None, False),
    ("agents.example.com:443", "https://agents.example.com", None, False),
    ("localhost:80", "http://localhost", None, False),
    ("127.0.0.1:8765", "http://evil.example", None, True),
    ("127.0.0.1:8765", "http://evil.example", "http://127.0.0.1:8765/", True),  # Origin is what counts
    ("127.0.0.1:8765", None, "http://evil.example/page", True),
    ("127.0.0.1:8765", "null", None, True),  # a sandboxed frame, a file:// page
    ("127.0.0.1:8765", "", None, True),
    ("127.0.0.1:8765", "http://127.0.0.1:8766", None, True),  # another server on this machine
    ("127.0.0.1:8765", "http://localhost:8765", None, True),  # the same port under another name
    ("127.0.0.1:8765", "file://", None, True),
    ("127.0.0.1:8765", "chrome-extension://abc", None, True),
    ("127.0.0.1:8765", "http://user@127.0.0.1:8765", None, True),
    ("127.0.0.1:8765", "http://[::1", None, True),
]


@pytest.mark.parametrize(("host", "origin", "referer", "refused"), ORIGINS)
def test_a_state_changing_request_comes_from_no_page_or_this_servers_own(
    host: str, origin: str | None, referer: str | None, refused: bool
) -> None:
    for method in sorted(STATE_CHANGING):
        found = foreign_origin(method, host, origin, referer)
        assert (found is not None) == refused, (method, host, origin, referer)
    for method in ("GET", "HEAD", "OPTIONS"):
        assert foreign_origin(method, host, origin, referer) is None


@given(st.text(max_size=40), st.none() | st.text(max_size=60), st.none() | st.text(max_size=60))
def test_reads_are_never_refused_for_their_origin(host: str, origin: str | None, referer: str | None) -> None:
    assert foreign_origin("GET", host, origin, referer) is None


@given(st.sampled_from(sorted(STATE_CHANGING)), st.text(max_size=40), st.text(max_size=60))
def test_a_post_from_a_page_is_taken_only_from_the_hosts_own_origin(
    method: str, host: str, origin: str
) -> None:
    if foreign_origin(method, host, origin, None) is None:
        parsed = split_host(host)
        assert parsed is not None and origin.lower().startswith(("http://", "https://"))
        assert parsed[0] in origin.lower()


@pytest.mark.parametrize(
    "header",
    [
        "X-Forwarded-For",
        "x-forwarded-host",
        "X-Forwarded-Proto",
        "Forwarded",
        "X-Real-IP",
        "Via",
        "True-Client-IP",
        "CF-Connecting-IP",
        "X-Client-IP",
    ],
)
def test_a_request_a_proxy_forwarded_is_not_local(header: str) -> None:
    headers = [("host", "127.0.0.1:8765"), (header, "203.0.113.9")]
    assert forwarded_by(headers) == header
    assert not is_local("127.0.0.1", headers)


def test_only_a_loopback_peer_with_no_forwarding_is_local() -> None:
    plain = [("host", "127.0.0.1:8765"), ("user-agent", "curl"), ("x-request-id", "1")]
    assert forwarded_by(plain) is None
    assert is_local("127.0.0.1", plain) and is_local("::1", plain)
    assert not is_local("192.0.2.1", plain) and not is_local(None, plain)


@pytest.mark.parametrize(
    ("content_type", "json"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON ;charset=UTF-8", True),
        (None, False),
        ("", False),
        ("text/plain", False),
        ("text/plain; application/json", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("application/jsonx", False),
        ("application/merge-patch+json", False),
    ],
)
def test_a_json_body_is_declared_as_application_json(content_type: str | None, json: bool) -> None:
    assert is_json(content_type) is json
