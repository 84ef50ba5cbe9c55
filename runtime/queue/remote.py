"""Decisions made outside a chat (the operator CLI, the web console) travel to the
workers: the decider reads the record (ApprovalView.decidable refuses what is settled),
then queues a `decision` inbox entry in the approval's session lane, as a click is queued.
A worker of any process serving that conversation takes it and decides through the same
atomic script as a click (so it owns the approved call, runs it in its own work dir and
sandbox, posts the answer and updates every notice), then tells the decider what came of it
on a per-request Redis list: one key, so one slot of a Redis Cluster, expiring on its own.

A worker killed between the decision and the run loses nothing: the entry stays in the
inbox until a worker finished it, and a redelivered job continues what it began (Retaken,
runtime/store/runs.py)."""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import BaseModel
from redis.asyncio import Redis

from runtime.approval.models import ApprovalRecord
from runtime.models import Actor
from runtime.queue.inbound import DecisionRequest, Inbound
from runtime.queue.ingest import Ingest
from runtime.store.keys import Keys

REPLIES_TTL_S = 3_600  # a decider that gave up waiting leaves nothing behind for long
# Under the Redis client's socket timeout (runtime/store/connection.py): a long wait is
# several blocking pops.
POP_SLICE_S = 5.0


class Reply(BaseModel):
    """One step of what came of a decision: `decided` (recorded, or counted toward a quorum),
    `refused` (why not), `ran` (the approved call ran), `answered` (what the thread got),
    `failed` (the call or the run failed, or its outcome is unknown). `final`: the last."""

    step: Literal["decided", "refused", "ran", "answered", "failed"]
    text: str
    final: bool = False


class Replies:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def push(self, request: str, reply: Reply) -> None:
        key = self.keys.decision_replies(request)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.rpush(key, reply.model_dump_json())
            pipe.expire(key, REPLIES_TTL_S)
            await pipe.execute()

    async def pop(self, request: str, timeout_s: float) -> Reply | None:
        """The next reply, waiting up to `timeout_s`; None if none came."""
        key = self.keys.decision_replies(request)
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            popped = await self.redis.blpop([key], timeout=min(left, POP_SLICE_S))
            if popped is not None:
                return Reply.model_validate_json(popped[1])
        return None


def decision_request(
    approve: bool,
    reason: str | None = None,
    always: bool = False,
    edit: str | None = None,
) -> DecisionRequest:
    """A new request, with its own id for the replies."""
    return DecisionRequest(
        approve=approve, reason=reason, always=always, edit=edit, reply=uuid.uuid4().hex
    )


async def send_decision(
    ingest: Ingest, record: ApprovalRecord, actor: Actor, request: DecisionRequest
) -> None:
    """Queue the decision in the approval's session lane (durable once this returned)."""
    await ingest(
        Inbound(
            platform=record.conversation.platform,
            event_id=f"decision:{request.reply}",
            dedupe_keys=(f"decision:{request.reply}",),
            session=record.session,
            conversation=record.conversation,
            actor=actor,
            text="",
            approval_id=record.id,
            kind="decision",
            decision=request,
        )
    )
