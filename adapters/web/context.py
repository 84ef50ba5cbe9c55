"""What the console's pages share: the runtime (its public API), the sign-in store, the inbox
through which decisions travel to the workers, the live changes, and the process's health."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from adapters.web.live import Changes
from runtime.agent import Runtime
from runtime.approval.desk import ApprovalDesk
from runtime.health import HealthReport
from runtime.queue.ingest import Ingest
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

    @property
    def desk(self) -> ApprovalDesk:
        runtime = self.runtime
        return ApprovalDesk(runtime.wing, runtime.decisions, runtime.policies)

    @property
    def traces(self) -> TraceStore:
        """Where runs' traces are read (their TTL is the writer's business)."""
        audit = self.runtime.audit
        return TraceStore(audit.redis, audit.keys)

    @property
    def secure(self) -> bool:
        """Served over https (the public URL says so): cookies are `Secure`."""
        return self.access.public_url.startswith("https://")


CONSOLE = web.AppKey("console", Console)
