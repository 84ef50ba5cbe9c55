"""An aiohttp app served on 127.0.0.1 from its own daemon thread and event loop.

Fakes of remote services subclass `ThreadedServer`, so they keep answering while a test blocks
and are reachable from worker subprocesses. A subclass adds its routes in `_routes`, counts and
closes its websocket clients (`connection_count`, `_close_sockets`) and logs what it saw in
`describe`; the base class owns the lifecycle (`start`/`stop`, sync and async `with`), `_run`
for coroutines on the server loop, and the polling helpers (`wait_for`, `await_for`,
`wait_connected`, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar, overload

from aiohttp import web

T = TypeVar("T")


class ThreadedServer:
    """Base of the fakes: an aiohttp app on 127.0.0.1:`port`, served from its own thread."""

    thread_name: ClassVar[str] = "threaded-server"
    """Prefix of the server thread's name (the port is appended)."""
    connections: ClassVar[str] = "connection(s)"
    """What `wait_connected` says it waits for, e.g. "socket connection(s)"."""

    def __init__(self) -> None:
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- what subclasses provide --------------------------------------------------------------

    def _routes(self, app: web.Application) -> None:
        """Add the fake's handlers to `app` (runs on the server loop)."""
        raise NotImplementedError

    async def _close_sockets(self) -> None:
        """Close every websocket from the server side (`disconnect_all`, and on `stop`)."""

    @property
    def connection_count(self) -> int:
        """Websocket clients connected right now."""
        return 0

    def describe(self) -> str:
        """Human-readable log of what the fake saw (used in timeout messages)."""
        return ""

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Origin, e.g. "http://127.0.0.1:PORT"."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        name = type(self).__name__
        if self._thread is not None:
            raise RuntimeError(f"{name} already started")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        self.port = int(sock.getsockname()[1])
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(sock))
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._cleanup())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(
            target=run, name=f"{self.thread_name}-{self.port}", daemon=True
        )
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{name} did not start")
        if errors:
            self._thread.join(5)
            self._thread = None
            raise RuntimeError(f"{name} failed to start") from errors[0]
        return self

    def stop(self) -> None:
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if not loop.is_closed():
            with contextlib.suppress(Exception):
                self._run(self._close_sockets(), timeout=5)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(15)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    async def _serve(self, sock: socket.socket) -> None:
        app = web.Application()
        self._routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def _cleanup(self) -> None:
        await self._close_sockets()
        if self._runner is not None:
            await self._runner.cleanup()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run a coroutine on the server loop from any other thread and wait for it."""
        loop = self._loop
        if loop is None or self._thread is None:
            coro.close()
            raise RuntimeError(f"{type(self).__name__} is not running")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(f"blocking {type(self).__name__} call from its own server thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    # -- websocket clients --------------------------------------------------------------------

    def disconnect_all(self) -> None:
        """Close every websocket connection from the server side (clients should reconnect).

        Waits for the close handshake: in an async test use `adisconnect_all`.
        """
        self._run(self._close_sockets())

    async def adisconnect_all(self) -> None:
        await asyncio.to_thread(self.disconnect_all)

    def wait_connected(self, timeout: float = 10.0, count: int = 1) -> None:
        self.wait_for(
            lambda: self.connection_count >= count, timeout, what=f"{count} {self.connections}"
        )

    async def await_connected(self, timeout: float = 10.0, count: int = 1) -> None:
        await self.await_for(
            lambda: self.connection_count >= count, timeout, what=f"{count} {self.connections}"
        )

    # -- waiting ------------------------------------------------------------------------------

    def wait_for(
        self,
        predicate: Callable[[], T | None],
        timeout: float = 10.0,
        *,
        what: str | None = None,
        interval: float = 0.02,
    ) -> T:
        """Poll `predicate` (blocking) until it returns something truthy; return that value.

        Use `await_for` inside async tests so their event loop keeps running.
        """
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(predicate, timeout, what))
            time.sleep(interval)

    @overload
    async def await_for(
        self,
        predicate: Callable[[], Awaitable[T | None]],
        timeout: float = 10.0,
        *,
        what: str | None = None,
        interval: float = 0.02,
    ) -> T: ...

    @overload
    async def await_for(
        self,
        predicate: Callable[[], T | None],
        timeout: float = 10.0,
        *,
        what: str | None = None,
        interval: float = 0.02,
    ) -> T: ...

    async def await_for(
        self,
        predicate: Callable[[], T | None] | Callable[[], Awaitable[T | None]],
        timeout: float = 10.0,
        *,
        what: str | None = None,
        interval: float = 0.02,
    ) -> T:
        """Async `wait_for`: polls with asyncio.sleep; `predicate` may be sync or async."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            result: T | None = await value if isinstance(value, Awaitable) else value
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(self._timeout_message(predicate, timeout, what))
            await asyncio.sleep(interval)

    def _timeout_message(self, predicate: object, timeout: float, what: str | None) -> str:
        name = what or getattr(predicate, "__qualname__", repr(predicate))
        return (
            f"{type(self).__name__}: timed out after {timeout}s waiting for {name}\n"
            f"{self.describe()}"
        )
