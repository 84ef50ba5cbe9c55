"""Traces in Redis: one JSON string per trace, with a TTL, plus for a run that paused the list
of the traces that resumed it (so one paused-and-resumed run can be drawn whole)."""

from __future__ import annotations

import logging

from pydantic import ValidationError
from redis.asyncio import Redis

from runtime.store.keys import Keys
from runtime.tracing.document import TraceDoc

log = logging.getLogger(__name__)

DEFAULT_TTL = 7 * 24 * 3600


class TraceStore:
    def __init__(self, redis: Redis, keys: Keys, ttl_s: int = DEFAULT_TTL) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_s = int(ttl_s)

    async def save(self, doc: TraceDoc) -> None:
        """One round trip: the document, and its id under each trace it resumes."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.keys.trace(doc.trace_id), doc.model_dump_json(), ex=self.ttl_s)
        for link in doc.links:
            key = self.keys.trace_resumed_by(link.trace_id)
            pipe.rpush(key, doc.trace_id)
            pipe.expire(key, self.ttl_s)
        await pipe.execute()

    async def load(self, trace_id: str) -> TraceDoc | None:
        raw = await self.redis.get(self.keys.trace(trace_id))
        if raw is None:
            return None
        try:
            return TraceDoc.model_validate_json(raw)
        except ValidationError:
            log.warning("trace %s: stored document is not readable", trace_id)
            return None

    async def resumed_by(self, trace_id: str) -> list[str]:
        """Ids of the traces that continued this one after a decision, oldest first."""
        ids = await self.redis.lrange(self.keys.trace_resumed_by(trace_id), 0, -1)
        return list(dict.fromkeys(str(i) for i in ids))
