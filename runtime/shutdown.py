"""Stopping background tasks for good."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

# Seconds between cancellations of a task that has not ended yet.
RECANCEL = 0.5


async def cancel(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait until every one has ended. A task may swallow its cancellation:
    one that arrives in the middle of a Redis command can come out of redis-py as a failed
    command (a connection torn down), which the task's retry loop catches and goes on. Such a
    task is cancelled again until it ends, not waited for forever (a stop that hung: a stalled
    worker that never exited, on a cluster, in about one run in three)."""
    tasks = list(tasks)
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL)
    for task in tasks:  # retrieved, so asyncio does not log them as never retrieved
        if not task.cancelled():
            with contextlib.suppress(BaseException):
                task.result()
