"""What a client can hold of `clawgate serve`: each connection goes through `Guarded`, in front
of aiohttp's own protocol, which refuses connections past a cap per client address and in
total, and closes one whose request headers are not in within the header timeout. Without it,
~20,000 connections that sent half a request line and stalled used up the process's file
descriptors (aiohttp before 3.10 waits for headers forever; later ones for keepalive_timeout,
which AppRunner leaves at an hour).

Even so a flood can run the process out of files for a moment: asyncio accepts up to a backlog
of sockets per wake-up, and a refused one is closed a loop turn later. asyncio then stops
accepting for a second and logs a traceback per failed accept; `Guarded` turns that into one
line a minute, and `raise_file_limit` gives the process the room its hard limit allows."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web

log = logging.getLogger(__name__)

HEADERS_END = (b"\r\n\r\n", b"\n\n")


@dataclass
class ConnectionLimits:
    """`per_client` connections at once from one address, `total` from all; `header_timeout`
    seconds for a connection's first request headers (between requests, aiohttp's
    keepalive_timeout, which `serve` sets to the same)."""

    per_client: int
    total: int
    header_timeout: float
    open: Counter[str] = field(default_factory=Counter)
    refusing: set[str] = field(default_factory=set)  # said once until they are under again

    def admit(self, client: str) -> bool:
        full = self.open.total() >= self.total
        if full or self.open[client] >= self.per_client:
            if client not in self.refusing:
                self.refusing.add(client)
                cap = f"{self.total} in all" if full else f"{self.per_client} from {client}"
                log.warning("http: refusing connections: %s open already", cap)
            return False
        self.open[client] += 1
        return True

    def release(self, client: str) -> None:
        self.refusing.clear()  # the next refusal is said again
        self.open[client] -= 1
        if self.open[client] <= 0:
            del self.open[client]


class Guarded(asyncio.Protocol):
    """One connection: `inner` (aiohttp's request handler) sees it only once admitted."""

    def __init__(self, inner: asyncio.Protocol, limits: ConnectionLimits) -> None:
        self.inner = inner
        self.limits = limits
        self.client: str | None = None  # set once admitted
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.tail = b""  # the last bytes seen, to find the end of headers across reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        self.transport = cast(asyncio.Transport, transport)
        if not self.limits.admit(client):
            self.transport.abort()
            return
        self.client = client
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.limits.header_timeout, self._too_slow)
        self.inner.connection_made(transport)

    def _too_slow(self) -> None:
        self.timer = None
        log.info("http: closing a connection from %s: no request headers in time", self.client)
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.client is None:
            return
        if self.timer is not None:
            seen = self.tail + data
            if any(end in seen for end in HEADERS_END):
                self.timer.cancel()
                self.timer = None
            self.tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.client is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client is None:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.limits.release(self.client)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.client is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.client is not None:
            self.inner.resume_writing()


class GuardedSite(web.TCPSite):
    """aiohttp's TCP site with every connection behind `Guarded`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, limits: ConnectionLimits):
        super().__init__(runner, host, port)
        self.limits = limits

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with the runner
        server = self._runner.server
        assert server is not None

        def connection() -> Guarded:
            return Guarded(server(), self.limits)

        loop = asyncio.get_running_loop()
        say_failed_accepts(loop)
        self._server = await loop.create_server(
            connection, self._host, self._port, backlog=self._backlog
        )


ACCEPT_FAILED = "socket.accept() out of system resource"  # asyncio's words for it
SAY_EVERY = 60.0  # seconds between two lines about failed accepts
# Files beyond the connections: a backlog of accepted sockets not yet refused, Redis, logs.
FILES_BESIDES_CONNECTIONS = 256
FILES_WANTED = 65_536  # the soft limit serve asks for, within its hard one


def say_failed_accepts(loop: asyncio.AbstractEventLoop) -> None:
    """One warning a minute, not a traceback per socket, when accepting fails for want of
    files or memory (asyncio pauses accepting for a second and retries by itself)."""
    previous = loop.get_exception_handler()
    said_at: float | None = None
    since = 0

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal said_at, since
        exc = context.get("exception")
        if context.get("message") != ACCEPT_FAILED or not isinstance(exc, OSError):
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        since += 1
        now = loop.time()
        if said_at is not None and now - said_at < SAY_EVERY:
            return
        said_at = now
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        log.warning(
            "http: cannot accept connections (%s; this process may open %d files): "
            "paused 1 s, %d time(s) this minute; raise `ulimit -n` or lower "
            "CLAWGATE_HTTP_MAX_CONNECTIONS",
            os.strerror(exc.errno) if exc.errno else exc,
            soft,
            since,
        )
        since = 0

    loop.set_exception_handler(handler)


def raise_file_limit(connections: int) -> str | None:
    """Raise this process's soft limit on open files toward its hard one, as Go programs do
    at start (a service's soft limit is often 1,024 while its hard one is far higher): to
    FILES_WANTED, or what `connections` need if more. No further: every child (commands,
    bwrap, MCP servers) inherits it, and some walk every possible descriptor. Returns a
    warning when even the hard limit leaves too little room for `connections` at once."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(connections + FILES_BESIDES_CONNECTIONS, FILES_WANTED)
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # above the kernel's own maximum: keep what we have
    needed = connections + FILES_BESIDES_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    return (
        f"this process may open {soft} files (`ulimit -n`), fewer than the "
        f"{connections} connections of CLAWGATE_HTTP_MAX_CONNECTIONS plus "
        f"{FILES_BESIDES_CONNECTIONS} for its own use: a flood of connections can pause "
        "accepting; raise the limit or lower the setting"
    )
