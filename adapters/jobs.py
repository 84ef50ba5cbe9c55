"""The worker's job handler: one inbox entry, from any platform, handed to the dispatcher,
with what the conversation is told when it cannot be handled (Redis away: said once, the
worker tries again; a bug: said, logged, never retried; given up after too many starts)."""

from __future__ import annotations

import contextlib
import time

from prometheus_client import Histogram

from adapters.dispatch import handle_inbound
from adapters.router import Router
from runtime import log_context
from runtime.agent import Runtime
from runtime.channel import Notice
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import Job
from runtime.queue.remote import Replies, Reply
from runtime.store.connection import OUTAGES

REDIS_WAIT = (
    "I cannot reach my storage (Redis) right now; your request is kept and will go on as "
    "soon as it is back."
)
FAILED = (
    "Something went wrong while handling this (logged as job {job}); it was not retried. "
    "Please try again, or tell the operators."
)
DROPPED = (
    "I gave up on a message here: every process that took it stopped while working on it. "
    "Please send it again if it is still needed."
)
DECISION_DROPPED = (
    "The decision was given up: every worker that took it stopped while carrying it out. "
    "`clawgate approvals show {id}` says where the approval stands."
)
QUEUE_LAG = Histogram(
    "clawgate_queue_lag_seconds",
    "Time from accepting an input to a worker starting on it",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class JobHandler:
    """What a worker (runtime/queue/worker.py) calls for each job it takes."""

    def __init__(self, runtime: Runtime, router: Router) -> None:
        self.runtime = runtime
        self.router = router

    async def dropped(self, job: Job) -> None:
        """A job given up after too many starts: whoever waits for it is told."""
        inbound = Inbound.model_validate_json(job.payload)
        if inbound.kind == "input":
            await self.router.send(inbound.conversation, Notice(DROPPED))
        elif inbound.decision is not None:
            text = DECISION_DROPPED.format(id=inbound.approval_id)
            replies = Replies(self.runtime.approvals.redis, self.runtime.approvals.keys)
            await replies.push(inbound.decision.reply, Reply(step="failed", text=text, final=True))

    async def __call__(self, job: Job) -> None:
        inbound = Inbound.model_validate_json(job.payload)
        QUEUE_LAG.observe(max(0.0, time.time() - inbound.received_at))
        try:
            with log_context.bound(conversation=inbound.conversation.id):
                await handle_inbound(self.runtime, self.router, inbound, job.id)
        except OUTAGES:
            if job.attempt == 0 and inbound.kind == "input":  # said once; the worker retries
                await self.router.send(inbound.conversation, Notice(REDIS_WAIT))
            raise
        except Exception:  # a bug: logged by the worker, never retried, but never silent
            with contextlib.suppress(Exception):
                await self.router.send(inbound.conversation, Notice(FAILED.format(job=job.id)))
            raise
