"""Durable ingest, shared by every adapter: dedupe an `Inbound` and append it to the inbox.
An adapter answers the platform only after this returned, so an accepted input is never lost."""

from __future__ import annotations

from redis.exceptions import RedisError

from runtime.inbound import Inbound
from runtime.metrics import DEDUPE_HITS
from runtime.store.inbox import Inbox


class IngestUnavailable(Exception):
    """Redis cannot take the input: the adapter answers 503 so the platform retries."""


class Ingest:
    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def __call__(self, inbound: Inbound) -> bool:
        """True if queued, False for a duplicate (already queued or handled)."""
        try:
            job_id = await self.inbox.put(
                inbound.session, inbound.model_dump_json(), inbound.dedupe_keys
            )
        except RedisError as exc:
            raise IngestUnavailable(str(exc)) from exc
        if job_id is None:
            DEDUPE_HITS.labels(inbound.platform).inc()
            return False
        return True
