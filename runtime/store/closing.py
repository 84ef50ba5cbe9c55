"""Writes that ride a job's last round trip: the worker opens a `Closing` around the job it
handles, and writes that nothing reads before the job ends (a run's trace, the journal's
"done") are queued there by `later`, then sent in the pipeline that acknowledges the job,
ahead of the acknowledgement (runtime/queue/inbox.py `Inbox.ack`).

Nothing is weakened by the wait: the job is acknowledged only with them, so a process that
dies before that trip leaves the job pending and whoever takes it finds exactly what it would
have found had the process died just before writing them. Outside a worker's job (the terminal
chat, the operator CLI) a run or a decision opens one of its own (`joined`), sent in one
pipeline when it ends; with none open, `later` declines and the write is sent at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any

Write = Callable[[Any], None]  # queues its commands on a redis-py pipeline
FAILED_SEND_S = 1.0  # after a failed block, how long its writes may take


class Closing:
    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.sent = False  # after that, a write that comes late goes on its own

    def queue(self, pipe: Any) -> int:
        """Queue what waits on `pipe` (once per try of the acknowledgement); how many
        commands that added."""
        before = len(pipe)
        for write in self.writes:
            write(pipe)
        return len(pipe) - before


_OPEN: ContextVar[Closing | None] = ContextVar("clawgate_closing", default=None)


@contextlib.contextmanager
def opened() -> Iterator[Closing]:
    closing = Closing()
    token = _OPEN.set(closing)
    try:
        yield closing
    finally:
        _OPEN.reset(token)


def later(write: Write) -> bool:
    """Leave `write` to the job's last trip; False when there is none to ride (the caller
    writes now)."""
    closing = _OPEN.get()
    if closing is None or closing.sent:
        return False
    closing.writes.append(write)
    return True


@contextlib.asynccontextmanager
async def joined(redis: Any) -> AsyncIterator[None]:
    """The block's writes ride the closing of the job it runs in; outside one they go in one
    pipeline when the block ends (also when it failed: a run's trace tells how)."""
    if _OPEN.get() is not None:
        yield
        return
    with opened() as closing:
        try:
            yield
        except BaseException:
            # What failed matters more: the rest goes if Redis takes it quickly.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_send(redis, closing), FAILED_SEND_S)
            raise
        await _send(redis, closing)


async def _send(redis: Any, closing: Closing) -> None:
    closing.sent = True  # a write from now on goes on its own
    if closing.writes:
        pipe = redis.pipeline(transaction=False)
        closing.queue(pipe)
        await pipe.execute()
