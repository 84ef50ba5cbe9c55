"""Traces in Redis: one JSON string per trace, with a TTL, plus for a run that paused the list
of the traces that resumed it (so one paused-and-resumed run can be drawn whole)."""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError
from redis.asyncio import Redis

from runtime.store.closing import later
from runtime.store.keys import Keys
from runtime.tracing.document import TraceDoc

log = logging.getLogger(__name__)

DEFAULT_TTL = 7 * 24 * 3600
# Append and set the TTL in one step (a script runs atomically, like MULTI, and touches one
# key, so it works on Redis Cluster too): the list never exists without its TTL.
_PUSH_WITH_TTL = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


class UnreadableTrace(Exception):
    """A trace is stored under the id but cannot be read (damaged, or another schema)."""


def _json(doc: TraceDoc) -> str:
    try:
        return doc.model_dump_json()
    except ValueError:  # a lone surrogate in model text: not UTF-8, so replace it
        text = json.dumps(doc.model_dump(mode="json"), ensure_ascii=False)
        return text.encode("utf-8", "replace").decode()


class TraceStore:
    def __init__(self, redis: Redis, keys: Keys, ttl_s: int = DEFAULT_TTL) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl_s = int(ttl_s)

    async def save(self, doc: TraceDoc) -> None:
        """One round trip, or none in a worker's job: the document, and its id under each
        trace it resumes, go with the job's acknowledgement (runtime/store/closing.py)."""
        text = _json(doc)
        if later(lambda pipe: self._queue(pipe, doc, text)):
            return
        pipe = self.redis.pipeline(transaction=False)
        self._queue(pipe, doc, text)
        await pipe.execute()

    def _queue(self, pipe: Any, doc: TraceDoc, text: str) -> None:
        pipe.set(self.keys.trace(doc.trace_id), text, ex=self.ttl_s)
        for link in doc.links:
            key = self.keys.trace_resumed_by(link.trace_id)
            pipe.eval(_PUSH_WITH_TTL, 1, key, doc.trace_id, self.ttl_s)

    async def load(self, trace_id: str) -> TraceDoc | None:
        """The trace, None when nothing is stored under the id; `UnreadableTrace` when what is
        stored cannot be read."""
        try:
            raw = await self.redis.get(self.keys.trace(trace_id))
        except UnicodeDecodeError as exc:
            raise UnreadableTrace(f"trace {trace_id}: not UTF-8 text") from exc
        if raw is None:
            return None
        try:
            return TraceDoc.model_validate_json(raw)
        except ValidationError as exc:
            raise UnreadableTrace(f"trace {trace_id}: {exc.error_count()} schema errors") from exc

    async def resumed_by(self, trace_id: str) -> list[str]:
        """Ids of the traces that continued this one after a decision, oldest first."""
        ids = await self.redis.lrange(self.keys.trace_resumed_by(trace_id), 0, -1)
        return list(dict.fromkeys(str(i) for i in ids))
