"""httpx's transport interface over aiohttp, for the `openai` client.

The client keeps its own request building, retries, errors and response types; only the
bytes go over aiohttp, which costs about a third less CPU a call than httpx's own transport
(httpcore on anyio). The SDK vendors such a transport too, but it reports a refused
connection and a dropped one as timeouts; this one names them as httpx does, so the chat is
told "cannot reach the model server", not "did not answer in time". It keeps httpx's limits
where aiohttp's differ: every timeout bounds its phase (aiohttp has no write timeout, and a
body its parser stops on waits for no timer), headers as long and as many as httpx takes,
and httpx's certificate trust. Behind a proxy set in the environment (HTTPS_PROXY and the
like) the client keeps httpx's own transport, which knows them (`http_client`)."""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import httpx2
from aiohttp.http_exceptions import HttpProcessingError
from openai import DefaultAsyncHttpxClient

CHUNK = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024  # a header line, as h11 (httpx) takes them
MAX_HEADERS = 1024


@contextmanager
def _as_httpx() -> Iterator[None]:
    """aiohttp's failures as the httpx ones the client retries and reports."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx2.ConnectTimeout(str(exc) or "connect timed out") from exc
    except aiohttp.ClientConnectorError as exc:  # refused, unresolvable, TLS handshake
        raise httpx2.ConnectError(str(exc)) from exc
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise httpx2.ReadTimeout(str(exc) or "read timed out") from exc
    except aiohttp.ClientPayloadError as exc:
        raise httpx2.ReadError(str(exc)) from exc
    except (aiohttp.ClientError, HttpProcessingError) as exc:  # dropped, reset, bad HTTP
        raise httpx2.RemoteProtocolError(str(exc)) from exc


def _deadline(timeout: dict[str, float | None]) -> float | None:
    """The longest the phases up to the answer's headers may take together: aiohttp times
    connecting and waiting for the headers, but not writing the body."""
    phases = [timeout.get(k) for k in ("pool", "connect", "write", "read")]
    return None if None in phases else sum(p for p in phases if p is not None)


class _Body(httpx2.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, read_s: float | None) -> None:
        self._response = response
        self._read_s = read_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx():
            while True:
                # Each read timed here: aiohttp's own read timer is dropped when its parser
                # stops on a malformed chunk, and the body would wait forever.
                async with asyncio.timeout(self._read_s):
                    chunk = await self._response.content.read(CHUNK)
                if not chunk:
                    return
                yield chunk

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    def __init__(self, max_connections: int = 1000, keepalive_s: float = 5.0) -> None:
        self._limits = (max_connections, keepalive_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        # Made on the first request, and again on another event loop: a session belongs to
        # the loop it was made on.
        loop = asyncio.get_running_loop()
        if self._session is not None and loop is not self._loop:
            _abandon(self._session)
        if self._session is None or self._session.closed or loop is not self._loop:
            limit, keepalive = self._limits
            connector = aiohttp.TCPConnector(
                limit=limit, keepalive_timeout=keepalive, ssl=httpx2.create_ssl_context()
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                max_line_size=MAX_HEADER_BYTES,
                max_field_size=MAX_HEADER_BYTES,
                max_headers=MAX_HEADERS,
            )
            self._loop = loop
        return self._session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()
        try:
            async with asyncio.timeout(_deadline(timeout)):
                with _as_httpx():
                    response = await self._client().request(
                        request.method,
                        str(request.url),
                        headers=request.headers.multi_items(),
                        data=body or None,
                        allow_redirects=False,  # the client follows them
                        auto_decompress=False,  # httpx decodes the body
                        timeout=aiohttp.ClientTimeout(
                            connect=timeout.get("pool"),
                            sock_connect=timeout.get("connect"),
                            sock_read=timeout.get("read"),
                        ),
                    )
        except TimeoutError as exc:  # the deadline: aiohttp's own timeouts are httpx's now
            raise httpx2.WriteTimeout("the request was not taken in time") from exc
        return httpx2.Response(
            status_code=response.status,
            headers=response.raw_headers,
            stream=_Body(response, timeout.get("read")),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            await asyncio.sleep(0)  # lets the connector close its sockets


def _abandon(session: aiohttp.ClientSession) -> None:
    """Closes a session of an event loop that is gone (its sockets went with it), so that
    nothing is said to be left unclosed."""
    connector = session.connector
    session.detach()
    if connector is not None:
        with contextlib.suppress(RuntimeError):  # "Event loop is closed"
            connector.close()


def http_client() -> httpx2.AsyncClient:
    """The `openai` client's own defaults, over aiohttp unless a proxy is set."""
    proxied = any(scheme != "no" for scheme in urllib.request.getproxies())
    return DefaultAsyncHttpxClient(transport=None if proxied else AiohttpTransport())
