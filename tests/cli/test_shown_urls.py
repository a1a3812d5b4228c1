"""The CLI never prints the credentials of a base URL the user gave."""

from __future__ import annotations

from steadyloop.cli.config import EndpointChoice, resolve


def test_a_password_in_the_base_url_is_not_in_the_label() -> None:
    resolved = resolve(
        EndpointChoice(base_url="http://ana:s3cret@127.0.0.1:9/v1", model="m"), env={}, config={}
    )
    assert "s3cret" not in resolved.label
    assert resolved.label == "http://ana:***@127.0.0.1:9/v1"
    assert resolved.endpoint.base_url == "http://ana:s3cret@127.0.0.1:9/v1"  # still what is sent
