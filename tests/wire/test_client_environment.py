"""A proxy or certificate setting in the environment that no client can use is a typed error, the same on
both transports, and nothing opened for the request is left behind."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Literal

import pytest

from steadyloop.errors import EndpointUnavailable, InvalidInput
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import aclose_clients, configure_clients, get_chat_client, lease_client

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
# Port 9 (discard) on loopback: nothing listens, so a request that did go out fails as unreachable.
URL = "http://127.0.0.1:9/v1"

BAD_PROXIES = {
    "port out of range": "http://127.0.0.1:99999",
    "port not a number": "http://127.0.0.1:abc",
    "newline": "http://pro\nxy:3128",
    "space": "not a url",
    "unclosed IPv6 bracket": "http://[::1:3128",
    "no host": "http://:3128",
    "unknown scheme": "gopher://127.0.0.1:3128",
    "credentials and a bad port": "http://user:s3cret@127.0.0.1:99999",
}


def clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


async def refusal(transport: Transport) -> InvalidInput:
    configure_clients(transport=transport)
    with pytest.raises(InvalidInput) as caught:
        client = get_chat_client(Endpoint(URL, api_key="sk-test"))
        await client.open_stream(BODY, connect_timeout=5)
    return caught.value


async def listing_refusal(transport: Transport) -> InvalidInput:
    configure_clients(transport=transport)
    with pytest.raises(InvalidInput) as caught, lease_client(Endpoint(URL, api_key="sk-test")) as client:
        await client.models.list()
    return caught.value


@pytest.mark.parametrize("proxy", list(BAD_PROXIES.values()), ids=list(BAD_PROXIES))
async def test_a_proxy_no_client_can_use_is_the_same_invalid_input_on_both_transports(
    proxy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv("http_proxy", proxy)
    messages = set()
    for transport in TRANSPORTS:
        for error in (await refusal(transport), await listing_refusal(transport)):
            assert "HTTP_PROXY" in str(error)
            assert "s3cret" not in str(error)
            messages.add(str(error))
        await aclose_clients()
    assert len(messages) == 1, messages
    gc.collect()  # an unclosed aiohttp session would warn here, and warnings are errors


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_missing_certificate_file_or_folder_is_invalid_input(
    transport: Transport, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clear_proxies(monkeypatch)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "absent.pem"))
    assert "SSL_CERT_FILE" in str(await refusal(transport))
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "absent"))
    assert "SSL_CERT_DIR" in str(await listing_refusal(transport))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_certificate_file_without_certificates_is_invalid_input(
    transport: Transport, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clear_proxies(monkeypatch)
    not_certificates = tmp_path / "notes.pem"
    not_certificates.write_text("no certificate here\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(not_certificates))
    configure_clients(transport=transport)
    with pytest.raises(InvalidInput, match="certificate"):
        client = get_chat_client(Endpoint("https://127.0.0.1:9/v1", api_key="sk-test"))
        await client.open_stream(BODY, connect_timeout=5)
    gc.collect()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_usable_proxy_setting_still_reaches_the_transport(
    transport: Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check refuses only what no client could use: a well-formed proxy is tried (nothing listens).
    clear_proxies(monkeypatch)
    monkeypatch.setenv("http_proxy", "127.0.0.1:9")
    configure_clients(transport=transport)
    with pytest.raises(EndpointUnavailable):
        await get_chat_client(Endpoint(URL, api_key="sk-test")).open_stream(BODY, connect_timeout=5)


async def test_the_aiohttp_transport_refuses_a_socks_proxy_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # aiohttp speaks to http proxies only: a SOCKS one would be ignored or misread, never used.
    clear_proxies(monkeypatch)
    monkeypatch.setenv("http_proxy", "socks5://127.0.0.1:1080")
    error = await refusal("aiohttp")
    assert "socks5" in str(error) and "httpx2" in str(error)
