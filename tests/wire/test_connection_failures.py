"""How a request that got no answer failed, read from the chain of errors the HTTP libraries raise.

The chains here are the shapes the transports raise (seen on aiohttp 3.14, httpx2 2.16 and the openai
SDK 3.60 against real sockets, which ``test_unreachable_endpoints`` drives): the socket's own error at the
bottom, wrapped once or three times, sometimes in the wrong class (the SDK's aiohttp transport calls a
refused connection a connect timeout).
"""

from __future__ import annotations

import socket
import ssl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import EndpointUnreachable
from steadyloop.wire.connection_failures import read_connection_failure, unreachable

URL = "http://127.0.0.1:9/v1"


class ConnectTimeout(Exception):
    """Named as httpx2's: the SDK's aiohttp transport maps every connection error to it."""


class ReadTimeout(Exception):
    """Named as httpx2's."""


class APITimeoutError(Exception):
    """Named as the SDK's: "Request timed out."."""


class RemoteProtocolError(Exception):
    """Named as httpx2's."""


class ClientConnectorError(OSError):
    """Like aiohttp's: the host and port it tried, the socket's error as its cause."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, str(cause))
        self.host, self.port = host, port


def wrapped(inner: BaseException, *outer: BaseException) -> BaseException:
    """``inner`` raised from each of ``outer`` in turn, innermost first, as ``raise X from Y`` chains them."""
    current = inner
    for layer in outer:
        layer.__cause__ = current
        current = layer
    return current


def refused() -> ConnectionRefusedError:
    return ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")


def test_a_refused_connection_called_a_timeout_by_the_sdk_still_reads_as_refused() -> None:
    chain = wrapped(
        refused(),
        ClientConnectorError("127.0.0.1", 9, refused()),
        ConnectTimeout("Cannot connect to host 127.0.0.1:9"),
        APITimeoutError("Request timed out."),
    )
    failure = read_connection_failure(chain, URL, timeout_s=30)
    assert (failure.connection, failure.lasting, failure.where) == ("refused", True, "127.0.0.1:9")
    assert failure.message() == "nothing listens on 127.0.0.1:9: start the server, or check the base URL"


def test_a_host_that_does_not_resolve_is_lasting_and_a_resolver_down_for_now_is_not() -> None:
    gone = read_connection_failure(
        wrapped(socket.gaierror(socket.EAI_NONAME, "Name or service not known"), OSError("connect")),
        "http://nohost.invalid/v1",
    )
    assert (gone.connection, gone.lasting, gone.host, gone.port) == ("dns", True, "nohost.invalid", 80)
    assert gone.message() == "cannot resolve host nohost.invalid: check the host name in the base URL"
    later = read_connection_failure(
        socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), "https://api.example/v1"
    )
    assert (later.connection, later.lasting, later.port) == ("dns", False, 443)
    assert later.problem == "cannot resolve host api.example for now (Temporary failure in name resolution)"


def test_a_certificate_not_trusted_and_a_port_without_tls_read_as_tls() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    untrusted = read_connection_failure(wrapped(verify, OSError("connect")), "https://127.0.0.1:8443/v1")
    assert (untrusted.connection, untrusted.lasting) == ("tls", True)
    assert untrusted.problem == (
        "TLS: certificate verify failed for 127.0.0.1:8443 (unable to get local issuer certificate)"
    )
    assert "SSL_CERT_FILE" in untrusted.fix
    plain = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    plain.reason = "WRONG_VERSION_NUMBER"
    no_tls = read_connection_failure(plain, "https://127.0.0.1:8080/v1")
    assert no_tls.connection == "tls" and "does not speak TLS" in no_tls.problem
    assert "http:// or https://" in no_tls.fix


def test_timeouts_say_which_phase_ran_out_and_the_allowance() -> None:
    connect = read_connection_failure(wrapped(TimeoutError(), ConnectTimeout()), URL, timeout_s=30)
    assert (connect.connection, connect.lasting, connect.connect_phase) == ("timeout", False, True)
    assert connect.problem == "no connection to 127.0.0.1:9 within 30 s"
    answer = read_connection_failure(
        wrapped(TimeoutError(), ReadTimeout(), APITimeoutError()), URL, timeout_s=2.5
    )
    assert answer.problem == "no answer from 127.0.0.1:9 within 2.5 s" and answer.fix == ""
    told = read_connection_failure(RuntimeError("cancelled"), URL, timed_out=True)
    assert told.connection == "timeout" and told.problem == "no answer from 127.0.0.1:9 in time"


def test_a_dropped_connection_is_retried_and_names_the_innermost_words() -> None:
    chain = wrapped(
        RemoteProtocolError("Server disconnected without sending a response."), OSError("Connection error.")
    )
    failure = read_connection_failure(chain, URL)
    assert (failure.connection, failure.lasting) == ("dropped", False)
    assert (
        failure.problem
        == "the connection to 127.0.0.1:9 broke (Server disconnected without sending a response.)"
    )
    reset = read_connection_failure(ConnectionResetError(104, "Connection reset by peer"), URL)
    assert reset.connection == "dropped"


def test_what_no_rule_reads_keeps_the_words_and_is_retried() -> None:
    failure = read_connection_failure(wrapped(ValueError("odd"), RuntimeError("boom")), URL)
    assert (failure.connection, failure.lasting) == ("other", False)
    assert failure.problem == "could not talk to 127.0.0.1:9: boom (odd)"


def test_a_group_of_attempts_and_a_cycle_are_read() -> None:
    group = ExceptionGroup("all attempts failed", [OSError("first"), refused()])
    assert read_connection_failure(group, URL).connection == "refused"
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__context__, second.__context__ = second, first
    assert read_connection_failure(first, URL).connection == "other"


def test_the_host_is_the_one_the_error_names_else_the_urls() -> None:
    via_proxy = ClientConnectorError("proxy.internal", 3128, refused())
    failure = read_connection_failure(via_proxy, "https://api.example/v1")
    assert failure.where == "proxy.internal:3128"
    ipv6 = read_connection_failure(refused(), "http://[::1]:8080/v1")
    assert ipv6.where == "[::1]:8080"


def test_the_typed_error_carries_what_a_caller_acts_on_and_no_password() -> None:
    error = unreachable(refused(), endpoint="http://ana:s3cret@127.0.0.1:9/v1", model="m", timeout_s=30)
    assert isinstance(error, EndpointUnreachable)
    assert (error.connection, error.kind, error.host, error.port) == (
        "refused",
        "unreachable",
        "127.0.0.1",
        9,
    )
    assert error.status is None and error.model == "m" and error.problem == "nothing listens on 127.0.0.1:9"
    assert "s3cret" not in str(error) and "s3cret" not in (error.endpoint or "")
    dropped = unreachable(ConnectionResetError(104, "reset"), endpoint=URL, model=None)
    assert dropped.kind == "transient"  # retried like a 503


_ERRORS = st.sampled_from(
    [
        lambda: refused(),
        lambda: socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
        lambda: socket.gaierror(socket.EAI_AGAIN, "Temporary failure"),
        lambda: ssl.SSLCertVerificationError(1, "certificate verify failed"),
        lambda: ssl.SSLError(1, "WRONG_VERSION_NUMBER"),
        lambda: ssl.SSLEOFError(8, "EOF"),
        lambda: TimeoutError(),
        lambda: ConnectTimeout(),
        lambda: ReadTimeout(),
        lambda: APITimeoutError("Request timed out."),
        lambda: RemoteProtocolError("Server disconnected"),
        lambda: ConnectionResetError(104, "reset"),
        lambda: OSError("All connection attempts failed"),
        lambda: RuntimeError(""),
        lambda: ValueError("http://bob:pw@host/ odd"),
    ]
)


@given(
    st.lists(_ERRORS, min_size=1, max_size=6),
    st.sampled_from([URL, "https://h.example", "http://[::1]:1/v1", "x"]),
)
def test_any_chain_reads_as_one_kind_with_words_and_a_fix_where_waiting_is_none(
    makers: list[object], url: str
) -> None:
    chain = wrapped(*[make() for make in makers])  # type: ignore[operator]
    failure = read_connection_failure(chain, url, timeout_s=5)
    assert failure.connection in ("refused", "dns", "tls", "timeout", "dropped", "other")
    assert failure.problem and failure.message().startswith(failure.problem)
    assert failure.fix or not failure.lasting
    assert "pw@" not in failure.message()


@pytest.mark.parametrize("connection", ["refused", "dns", "tls"])
def test_the_lasting_ones_are_exactly_those_sending_again_cannot_fix(connection: str) -> None:
    inner = {
        "refused": refused(),
        "dns": socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
        "tls": ssl.SSLCertVerificationError(1, "certificate verify failed"),
    }[connection]
    assert read_connection_failure(inner, URL).lasting
