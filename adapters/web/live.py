"""Live updates: `GET /console/events` is a server-sent event stream that says `change`
whenever the audit trail records something a console page shows (an approval requested,
decided, run, expired; a grant added or revoked; a policy changed). It says nothing of what
changed: the page fetches itself again, as the person it belongs to, so a stream never shows
anyone what their pages would not. A stream ends once its session does (revoked, expired).

One task per process follows the audit stream (XREAD BLOCK), only while someone watches, and
wakes every open stream; the chat path never waits for it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from runtime.audit import AuditLog
from runtime.store.connection import OUTAGES

log = logging.getLogger(__name__)

KEEPALIVE_S = 15.0  # a comment line this often keeps proxies from closing an idle stream
RETRY_MS = 2_000  # how soon a browser reconnects a dropped stream
# What the pages show. Not `console_`: anyone may cause those (a refused sign-in), and each
# change makes every open page fetch itself again.
SHOWN = ("approval_", "grant_", "question_", "policy_", "tool_executed", "call_")


class Changes:
    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit
        self.version = 0
        self._changed = asyncio.Event()
        self._closed = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None
        self._watchers = 0

    async def close(self) -> None:
        self._closed.set()
        self._changed.set()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower

    def _notify(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def _follow(self) -> None:
        after = None
        while not self._closed.is_set() and self._watchers:
            try:
                after = after or await self.audit.last_id()
                async for entry in self.audit.follow(after, block_ms=1000, stop=self._closed):
                    after = entry.id
                    if entry.event.startswith(SHOWN):
                        self._notify()
                    if not self._watchers:
                        break
                else:
                    return
            except OUTAGES as exc:  # Redis away: try again shortly, pages still load
                log.warning("console: cannot follow the audit trail (%s)", type(exc).__name__)
                await asyncio.sleep(1.0)

    async def wait(self, seconds: float, seen: int) -> bool:
        """Whether something changed since version `seen`, waiting up to `seconds` (a
        change made while the watcher was busy writing counts too)."""
        if self.version > seen:
            return True
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await changed.wait()
        return self.version > seen

    async def stream(
        self, request: web.Request, alive: Callable[[], Awaitable[bool]]
    ) -> web.StreamResponse:
        """The stream for `request` while `alive()` says its watcher may still watch."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        self._watchers += 1
        if self._follower is None or self._follower.done():
            self._follower = asyncio.create_task(self._follow())
        seen = self.version
        try:
            while not self._closed.is_set():
                changed = await self.wait(KEEPALIVE_S, seen)
                if self._closed.is_set() or not await _still(alive):
                    break
                if changed:
                    seen = self.version
                    await response.write(f"event: change\ndata: {seen}\n\n".encode())
                else:
                    await response.write(b": keepalive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers -= 1
        return response


async def _still(alive: Callable[[], Awaitable[bool]]) -> bool:
    try:
        return await alive()
    except OUTAGES:  # Redis away: cannot tell, keep the stream (the pages say what is wrong)
        return True
