"""Durable ingest, shared by every adapter: dedupe an `Inbound` and append it to the inbox,
in the lane of its session (for a decision: of the approval's session). An adapter answers
the platform only after this returned, so an accepted input is never lost."""

from __future__ import annotations

import asyncio

from redis.exceptions import RedisError

from runtime.approval.store import ApprovalStore
from runtime.metrics import DEDUPE_HITS
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import Inbox, NotDurable
from runtime.store.connection import CLUSTER_OUTAGES

DEADLINE = 2.0  # seconds: platforms give up after 3, and a 503 makes them retry
UNAVAILABLE: tuple[type[Exception], ...] = (RedisError, TimeoutError, NotDurable, *CLUSTER_OUTAGES)


class IngestUnavailable(Exception):
    """Redis cannot take the input (in time): the adapter answers 503 so the platform retries."""


class Ingest:
    def __init__(self, inbox: Inbox, approvals: ApprovalStore) -> None:
        self.inbox = inbox
        self.approvals = approvals

    async def __call__(self, inbound: Inbound) -> bool:
        """True if queued, False for a duplicate (already queued or handled)."""
        try:
            async with asyncio.timeout(DEADLINE):
                job_id = await self.inbox.put(
                    await self.lane(inbound), inbound.model_dump_json(), inbound.dedupe_keys
                )
        except UNAVAILABLE as exc:
            raise IngestUnavailable(str(exc) or "Redis did not answer in time") from exc
        if job_id is None:
            DEDUPE_HITS.labels(inbound.platform).inc()
            return False
        return True

    async def lane(self, inbound: Inbound) -> str:
        if inbound.approval_id:
            session = await self.approvals.session_of(inbound.approval_id.strip().lower())
            if session is not None:
                return session
        return inbound.session
