"""``steadyloop serve``'s own arguments: tokens from flags and the environment, and no open bind without one."""

from __future__ import annotations

import pytest

from steadyloop.cli.app import build_parser, main
from steadyloop.cli.serve import check_open_bind, parse_tokens
from steadyloop.errors import InvalidInput


def test_tokens_come_from_flags_and_the_environment() -> None:
    env = {"STEADYLOOP_SERVER_TOKENS": "alice=tok-a-123456, bob=tok-b-123456"}
    assert parse_tokens(["carol=tok-c-123456", "bare-token-123"], env) == {
        "tok-c-123456": "carol",
        "bare-token-123": "default",
        "tok-a-123456": "alice",
        "tok-b-123456": "bob",
    }
    with pytest.raises(InvalidInput):
        parse_tokens(["alice="], {})


def test_a_bind_beyond_loopback_needs_a_token() -> None:
    check_open_bind("127.0.0.1", {})
    check_open_bind("::1", {})
    check_open_bind("0.0.0.0", {"tok-a-123456": "alice"})
    with pytest.raises(InvalidInput, match="without a bearer token"):
        check_open_bind("0.0.0.0", {})


def test_serve_refuses_an_open_bind_before_touching_the_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "9"])
    assert args.port == 9 and args.max_runs == 16
    assert main(["serve", "--host", "0.0.0.0", "--base-url", "http://127.0.0.1:1/v1"]) == 1
    assert "refusing to listen on 0.0.0.0" in capsys.readouterr().err
