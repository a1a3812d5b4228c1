"""``steadyloop serve``'s own arguments: tokens from flags and the environment, and no open bind without one."""

from __future__ import annotations

import pytest

from steadyloop.cli.app import build_parser, main
from steadyloop.cli.serve import check_open_bind, parse_tokens, serve_floor
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


def test_the_operators_floor_comes_from_the_flags_else_the_config_file() -> None:
    default = serve_floor({})
    assert default.allowed_hosts == ()
    assert default.approval_policy.require_for == {"mutate-reversible", "mutate-irreversible", "destructive"}
    assert default.approval_policy.timeout_s == 300
    config = {
        "serve": {
            "allow_hosts": ["agents.example.com"],
            "require_approval": ["destructive"],
            "approval_timeout": 120,
        }
    }
    from_file = serve_floor(config)
    assert from_file.allowed_hosts == ("agents.example.com",)
    assert from_file.approval_policy.require_for == {"destructive"}
    assert from_file.approval_policy.timeout_s == 120
    flagged = serve_floor(config, allow_hosts=["box.lan"], require_approval=["none"], approval_timeout=30)
    assert flagged.allowed_hosts == ("box.lan",)
    assert flagged.approval_policy.require_for == frozenset()
    assert flagged.approval_policy.timeout_s == 30
    for bad, words in [
        ({"serve": {"allow_hosts": "agents.example.com"}}, "list of strings"),
        ({"serve": {"require_approval": ["everything"]}}, "no effect class"),
        ({"serve": {"require_approval": ["none", "read"]}}, "cannot be given with effects"),
        ({"serve": {"approval_timeout": 0}}, "above 0"),
        ({"serve": {"approval_timeout": True}}, "above 0"),
        ({"serve": {"allowed_hosts": []}}, "no setting 'allowed_hosts'"),
        ({"serve": []}, "must be a table"),
    ]:
        with pytest.raises(InvalidInput, match=words):
            serve_floor(bad)


def test_serve_takes_the_floor_flags() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--allow-host",
            "agents.example.com",
            "--allow-host",
            "10.0.0.5",
            "--require-approval",
            "destructive",
            "--approval-timeout",
            "60",
        ]
    )
    assert args.allow_host == ["agents.example.com", "10.0.0.5"]
    assert args.require_approval == ["destructive"] and args.approval_timeout == 60
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--require-approval", "sometimes"])
