"""Streamed chat-completions requests sent straight through aiohttp: the default transport.

The request is what the SDK would send for a streamed chat completion (bearer key, JSON body, the event
stream asked for), built directly: at hundreds of concurrent runs the SDK's per-request building and
httpx2's pool cost more than everything else a turn does. A refusal is read and classified exactly as the
SDK path classifies it, so both transports raise the same errors for the same response, and a TLS endpoint
is verified against the same certificates the SDK's client trusts.
"""

from __future__ import annotations

import base64
import functools
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import yarl

from ...errors import InvalidInput
from ..endpoints import Endpoint
from ..failures import classify_failure
from ..interceptors import ResponseInfo, ResponseInterceptor, observe
from ..typed_errors import error_for_failure, unreachable_error
from . import json_codec
from .chat_client import ChatStream
from .sending import request_sent
from .stream_body import settle

__all__ = ["AiohttpChatClient"]

# What the SDK allows at once per client; more requests than this wait for a connection.
_MAX_CONNECTIONS = 1000


def _user_agent() -> str:
    try:
        return f"steadyloop/{version('steadyloop')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "steadyloop"


def _env_proxy(url: str) -> tuple[str | None, dict[str, str] | None]:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``, ...), and the headers
    that carry its credentials (``Proxy-Authorization``) when its URL has them."""
    parts = urlsplit(url)
    if proxy_bypass(parts.hostname or ""):
        return None, None
    proxy = getproxies().get(parts.scheme)
    if not proxy:
        return None, None
    parsed = yarl.URL(proxy if "://" in proxy else f"http://{proxy}")
    if parsed.scheme not in ("http", "https"):
        raise InvalidInput(
            f"the aiohttp transport cannot send through the {parsed.scheme} proxy the environment names "
            "(it speaks to http and https proxies only): use configure_clients(transport='httpx2') with "
            "pip install socksio"
        )
    if not parsed.user:
        return str(parsed), None
    pair = f"{parsed.user}:{parsed.password or ''}".encode()
    return str(parsed.with_user(None)), {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}


def _tls_context(url: str) -> ssl.SSLContext | bool:
    """The certificates to verify ``url`` against: the SDK client's own choice (``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` as they are now, the system's trust store on macOS and Windows), so an endpoint trusted
    on one transport is trusted on the other. aiohttp's own default is built once when it is imported, from
    OpenSSL's paths alone."""
    if not url.startswith("https://"):
        return True  # nothing to verify; loading certificates would only cost time
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context_for(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # One per trust setting, shared by every endpoint: loading the certificates reads the disk.
    import httpx2  # the SDK's HTTP library, installed with it

    return httpx2.create_ssl_context()


class _AiohttpStream:
    __slots__ = ("_endpoint", "_key", "_model", "_response")

    def __init__(self, response: aiohttp.ClientResponse, endpoint: str, model: str | None, key: str) -> None:
        self._response = response
        self._endpoint = endpoint
        self._model = model
        self._key = key

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        response = self._response
        content = response.content
        try:
            data = await content.readany()
            if not data:
                return
            # The first read tells a stream from a page or a whole JSON answer (see stream_body).
            data, ended = await settle(
                data,
                content.readany,
                response.headers.get("Content-Type", ""),
                status=response.status,
                endpoint=self._endpoint,
                model=self._model,
                secrets=(self._key,),
            )
            yield data
            if ended:
                return
            while True:
                data = await content.readany()
                if not data:
                    return
                yield data
        except (aiohttp.ClientError, OSError) as exc:
            raise unreachable_error(exc, endpoint=self._endpoint, model=self._model) from exc

    def close(self) -> None:
        # Releasing a response that was not read to the end closes its connection rather than pooling it.
        self._response.release()


class _RequestTrace:
    """What aiohttp's trace tells of one request: whether its connection came from the pool."""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


async def _note_reused(_session: aiohttp.ClientSession, context: Any, _params: object) -> None:
    context.trace_request_ctx.reused = True


async def _note_sent(_session: aiohttp.ClientSession, _context: Any, _params: object) -> None:
    request_sent()


def _reuse_trace() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_note_reused)
    trace.on_request_headers_sent.append(_note_sent)
    return trace


def _closed_unanswered(exc: BaseException) -> bool:
    """Whether a request failed because its connection was closed under it before any answer came.

    On a connection taken from the pool this is the server having dropped it while it sat idle
    (llama-server closes idle keep-alive connections after a few seconds), not a server in trouble.
    A connect that failed, or a disconnect after part of an answer, is something else.
    """
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return isinstance(exc.message, str)  # otherwise it carries the part of a response it read
    if isinstance(exc, aiohttp.ClientConnectorError):
        return False
    return isinstance(exc, aiohttp.ClientOSError | aiohttp.ClientConnectionResetError)


class AiohttpChatClient:
    """One endpoint's streamed requests over one aiohttp session (its own connection pool).

    Build it inside the event loop that will use it; ``aclose`` it on that loop.
    """

    __slots__ = (
        "_endpoint",
        "_fresh_session",
        "_headers",
        "_key",
        "_proxy",
        "_proxy_headers",
        "_session",
        "_timeouts",
        "_url",
    )

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint.base_url
        self._key = endpoint.key
        url = yarl.URL(f"{endpoint.base_url}/chat/completions")
        authorization = f"Bearer {endpoint.key}"
        if url.user is not None:
            # Credentials in the URL are sent as basic auth in place of the key, as the SDK's client
            # sends them; aiohttp refuses a URL that carries them beside an Authorization header.
            pair = f"{url.user}:{url.password or ''}".encode()
            authorization = "Basic " + base64.b64encode(pair).decode()
            url = url.with_user(None)
        self._url = str(url)
        self._headers = {
            "Authorization": authorization,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "User-Agent": _user_agent(),
        }
        # Proxies from the environment are honoured, as the SDK's client honours them, but read once here:
        # aiohttp's trust_env reads the whole environment again on every request, which at a thousand
        # concurrent requests costs as much as the requests themselves.
        self._proxy, self._proxy_headers = _env_proxy(self._url)
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=_MAX_CONNECTIONS, ssl=_tls_context(self._url)),
            timeout=aiohttp.ClientTimeout(total=None),
            trace_configs=[_reuse_trace()],
        )
        # Built on the first request that met a pooled connection the server had closed; see open_stream.
        self._fresh_session: aiohttp.ClientSession | None = None

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def open_stream(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        on_response: ResponseInterceptor | None = None,
    ) -> ChatStream:
        model = body.get("model") if isinstance(body.get("model"), str) else None
        try:
            data = json_codec.dumps(body)
        except TypeError as exc:
            raise InvalidInput(f"the request body cannot be sent as JSON: {exc}") from exc
        timeout = self._timeouts.get(connect_timeout)
        if timeout is None:
            timeout = self._timeouts[connect_timeout] = aiohttp.ClientTimeout(
                total=None, sock_connect=connect_timeout
            )
        request = _RequestTrace()
        try:
            response = await self._post(self._session, data, timeout, request)
        except (aiohttp.ClientError, OSError) as exc:  # a connect timeout is an OSError too
            if not (request.reused and _closed_unanswered(exc)):
                raise unreachable_error(
                    exc, endpoint=self._endpoint, model=model, timeout_s=connect_timeout
                ) from exc
            # The server closed this kept-alive connection while it sat in the pool and nothing was
            # answered: the request goes again at once, once, on a connection opened for it. It is not a
            # retry (no backoff, no notice): the server was never asked. A fresh connection that fails is
            # a real failure and is raised as one, for the retry policy or the next candidate.
            try:
                response = await self._post(self._fresh(), data, timeout, _RequestTrace())
            except (aiohttp.ClientError, OSError) as again:
                raise unreachable_error(
                    again, endpoint=self._endpoint, model=model, timeout_s=connect_timeout
                ) from again
        if on_response is not None:
            info = ResponseInfo(response.status, dict(response.headers), self._endpoint, model)
            try:
                await observe("on_response", on_response, info)
            except BaseException:
                response.release()
                raise
        if 200 <= response.status < 300:
            return _AiohttpStream(response, self._endpoint, model, self._key)
        try:
            text = (await response.read()).decode("utf-8", "replace")
        except (aiohttp.ClientError, OSError) as exc:
            text = f"HTTP {response.status} (the body could not be read: {exc})"
        finally:
            response.release()
        failure = classify_failure(response.status, text, dict(response.headers))
        raise error_for_failure(failure, endpoint=self._endpoint, model=model)

    async def _post(
        self,
        session: aiohttp.ClientSession,
        data: bytes,
        limits: aiohttp.ClientTimeout,
        request: _RequestTrace,
    ) -> aiohttp.ClientResponse:
        return await session.post(
            self._url,
            data=data,
            headers=self._headers,
            timeout=limits,
            proxy=self._proxy,
            proxy_headers=self._proxy_headers,
            trace_request_ctx=request,
        )

    def _fresh(self) -> aiohttp.ClientSession:
        """A session whose every request opens its own connection: another pooled one may be stale too."""
        if self._fresh_session is None:
            self._fresh_session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, ssl=_tls_context(self._url)),
                timeout=aiohttp.ClientTimeout(total=None),
                trace_configs=[_reuse_trace()],
            )
        return self._fresh_session

    async def aclose(self) -> None:
        await self._session.close()
        if self._fresh_session is not None:
            await self._fresh_session.close()
