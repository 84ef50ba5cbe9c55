"""What the console's pages share: the runtime (its public API), the sign-in store, the inbox
through which decisions travel to the workers, the live changes, and the process's health."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from adapters.web.live import Changes
from runtime.agent import Runtime
from runtime.approval.desk import ApprovalDesk
from runtime.health import HealthReport
from runtime.queue.ingest import Ingest
from runtime.queue.remote import Replies
from runtime.tracing.store import TraceStore
from runtime.web_access import WebAccess

# The Health page's facts, as the serving process gathers them (bot/health_facts.py).
Health = Callable[[], Awaitable[HealthReport]]


@dataclass
class Console:
    runtime: Runtime
    access: WebAccess
    ingest: Ingest
    changes: Changes
    health: Health | None = None  # None: this process cannot say (the page says so)
    # Decisions whose page waits for the worker's first word at once: each wait holds one
    # of the Redis connections the chat path uses too; the rest go on without waiting.
    waits: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(8))

    @property
    def desk(self) -> ApprovalDesk:
        runtime = self.runtime
        return ApprovalDesk(runtime.wing, runtime.policies)

    @property
    def traces(self) -> TraceStore:
        """Where runs' traces are read (their TTL is the writer's business)."""
        audit = self.runtime.audit
        return TraceStore(audit.redis, audit.keys)

    @property
    def replies(self) -> Replies:
        """What workers tell of the decisions queued here (runtime/queue/remote.py)."""
        audit = self.runtime.audit
        return Replies(audit.redis, audit.keys)

    @property
    def secure(self) -> bool:
        """Served over https (the public URL says so): cookies are `Secure`."""
        return self.access.public_url.startswith("https://")


CONSOLE = web.AppKey("console", Console)
