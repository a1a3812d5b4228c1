"""Endpoints and the pooled client per endpoint."""

from __future__ import annotations

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.wire.endpoints import NO_KEY, Endpoint, endpoint_id, endpoint_key
from steadyloop.wire.transport.clients import configure_clients, get_client, pool_size, reset_clients


def test_an_absent_and_an_empty_key_are_the_same_endpoint() -> None:
    a = Endpoint("http://127.0.0.1:8080/v1/")
    b = Endpoint("http://127.0.0.1:8080/v1", api_key="")
    assert endpoint_key(a) == endpoint_key(b) == endpoint_key("http://127.0.0.1:8080/v1", None)
    assert a.key == NO_KEY and endpoint_id(a) == endpoint_id(b)
    keyed = Endpoint("http://127.0.0.1:8080/v1", api_key="sk-secret")
    assert endpoint_key(keyed) != endpoint_key(a)
    assert "sk-secret" in endpoint_key(keyed) and "sk-secret" not in endpoint_id(keyed)
    assert len(endpoint_id(keyed)) == 64


def test_timeouts_and_their_defaults() -> None:
    assert Endpoint("http://x/v1", request_timeout=10).first_chunk_timeout == 50
    assert Endpoint("http://x/v1", request_timeout=10, first_token_timeout=7).first_chunk_timeout == 7
    forever = Endpoint("http://x/v1", request_timeout=0)
    assert forever.idle_timeout is None and forever.first_chunk_timeout is None


@pytest.mark.parametrize("bad", ["", "ftp://x", "localhost:8080"])
def test_a_bad_base_url_is_a_clear_error(bad: str) -> None:
    with pytest.raises(InvalidInput, match="base_url"):
        Endpoint(bad)


def test_a_negative_timeout_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput, match="request_timeout"):
        Endpoint("http://x/v1", request_timeout=-1)


async def test_one_client_per_endpoint_and_timeout() -> None:
    a = Endpoint("http://127.0.0.1:1/v1")
    assert get_client(a) is get_client(Endpoint("http://127.0.0.1:1/v1", api_key=""))
    assert get_client(a) is not get_client(Endpoint("http://127.0.0.1:1/v1", request_timeout=5))
    assert get_client(a).max_retries == 0
    assert pool_size() == 2


async def test_the_pool_is_an_lru_and_lowering_the_cap_evicts_at_once() -> None:
    assert configure_clients(max_clients=3).max_clients == 3
    endpoints = [Endpoint(f"http://127.0.0.1:{port}/v1") for port in range(1, 5)]
    clients = [get_client(e) for e in endpoints[:3]]
    get_client(endpoints[0])  # now the most recently used
    get_client(endpoints[3])  # evicts endpoints[1], the least recently used
    assert pool_size() == 3
    assert get_client(endpoints[0]) is clients[0] and get_client(endpoints[2]) is clients[2]
    assert configure_clients(max_clients=1).max_clients == 1
    assert pool_size() == 1


def test_configure_clients_keeps_settings_on_values_that_are_not_positive() -> None:
    settings = configure_clients(max_clients=0, listing_miss_s=-5)
    assert settings.max_clients == 32 and settings.listing_miss_s == 30.0
    assert configure_clients(listing_miss_s=2).listing_miss_s == 2.0
    reset_clients()
    assert configure_clients().listing_miss_s == 30.0
