"""What a Redis outage is, and saying one once per process, not once per loop and try.

Background loops (the worker's reads and acks, liveness marks, takeovers, the approval sweep)
each retry on their own while Redis is away; each logging its failure made about 90 lines in
10 s for `serve` with its worker, and a traceback every 5 s in `clawgate chat`. Here the first
failure is one warning; those after it are counted, not logged; and once Redis answers a
PING again, one line says it is back, after how long and how many retries. A failure that is
no outage (a refused command, a script error) is not this module's: its caller logs it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

from redis.exceptions import ClusterDownError, RedisClusterException, RedisError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime.redact import one_line

log = logging.getLogger(__name__)

# A cluster that cannot serve a slot for now (a master down or failing over, no node
# reachable): an outage to wait out like a lost connection, not a failure of the job at hand.
# The client's own errors (RedisClusterException: "cannot be connected", SlotNotCoveredError)
# are no RedisError, so code that catches RedisError must name them too; the few of them that
# are bugs (a transaction across slots) fail every test that reaches them.
CLUSTER_OUTAGES: tuple[type[Exception], ...] = (
    ClusterDownError,
    TryAgainError,
    RedisClusterException,
)
# Redis unreachable (not a script or data error): whatever met it is worth trying again, in
# place; also a cluster whose master for the slot is down or moving.
OUTAGES: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, *CLUSTER_OUTAGES)

PROBE_SECONDS = 1.0  # how often an outage's probe asks Redis whether it is back


class Outage:
    """The process's view of whether Redis is away (one instance: `OUTAGE`)."""

    def __init__(self) -> None:
        self.since: float | None = None  # monotonic time of the first failure, while away
        self.retries = 0  # failures since that first one
        self._redis: Any = None
        self._probe: asyncio.Task[None] | None = None

    def watch(self, redis: Any) -> None:
        """The client whose PING tells when Redis is back (the process's own). Until one is
        given, every outage failure is logged (a line each, no traceback)."""
        if self._probe is not None:
            self._probe.cancel()
        self._redis, self._probe, self.since, self.retries = redis, None, None, 0

    def failed(self, what: str, exc: BaseException) -> bool:
        """`what` (a background step: "inbox read") failed. An outage is said once and
        counted (True); anything else is left to the caller to log (False)."""
        if not isinstance(exc, OUTAGES):
            return False
        if self._redis is None:
            log.warning("Redis unreachable (%s: %s); retrying", what, _short(exc))
            return True
        if self._probe is not None and self._probe.done():  # its event loop ended: anew
            self.since, self._probe = None, None
        if self.since is not None:
            self.retries += 1
            return True
        self.since = time.monotonic()
        log.warning(
            "Redis unreachable (%s: %s); retrying, nothing accepted is lost; said again once "
            "it is back",
            what,
            _short(exc),
        )
        self._probe = asyncio.get_running_loop().create_task(self._until_back())
        return True

    async def _until_back(self) -> None:
        for _ in itertools.count():  # a PING a second until one is answered
            await asyncio.sleep(PROBE_SECONDS)
            if await self._answers():
                break
        assert self.since is not None
        retries = f"{self.retries} {'retry' if self.retries == 1 else 'retries'}"
        log.warning(
            "Redis is back after %.0f s (%s meanwhile)", time.monotonic() - self.since, retries
        )
        self.since, self.retries = None, 0

    async def _answers(self) -> bool:
        try:
            await self._redis.ping()
        except (RedisError, RedisClusterException, OSError):  # away still, or loading its data
            return False
        return True


def _short(exc: BaseException) -> str:
    """The error's own words on one line (redis-py's may span several)."""
    return one_line(str(exc), 300) or type(exc).__name__


OUTAGE = Outage()
