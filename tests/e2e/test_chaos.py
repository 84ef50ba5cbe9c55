"""The chaos suite, small enough for CI (tests/e2e/chaos.py runs it big by hand), and a Redis
that stalls right after a decision: real `clawgate` processes, a real redis-server, SIGKILL
and SIGSTOP."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.e2e.chaos import CHANNEL, Chaos, RedisServer, chaos
from tests.fake_slack import FakeSlack

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier


async def test_kills_and_stalls_of_serve_and_worker_lose_and_double_nothing() -> None:
    """SIGKILLs, and SIGSTOPs longer than the liveness time: a stalled process's jobs are
    taken over, and it must not go on with them when it wakes (runtime/ownership/lease.py)."""
    figures = await chaos(messages=60, threads=6, kills=8, freezes=4, seed=7, settle=60)
    report = figures.report()
    assert figures.messages == 60, report
    assert figures.kills["serve"] + figures.kills["worker"] == 8, report
    assert figures.kills["serve frozen"] + figures.kills["worker frozen"] >= 1, report
    assert not figures.lost, report
    assert not figures.answered_twice, report
    assert not figures.appended_twice, report
    assert not figures.run_twice, report
    assert not figures.unknown_free, report  # a read-only command runs again instead
    assert figures.audit_chain.startswith("intact"), report  # kill -9 never breaks the chain
    # A killed process's jobs were taken over (how fast is a figure of `python -m
    # tests.e2e.chaos`, docs/performance.md: a timed assertion would fail on a busy machine).
    assert figures.takeovers, report


async def test_redis_killed_with_fsync_ingest_loses_no_acknowledged_message() -> None:
    """Every mention serve answered 200 is kept through kill -9 of redis-server (AOF with
    `appendfsync always`, CLAWGATE_INGEST_DURABILITY=fsync); the ones sent while it was down
    were answered 503 and sent again, as Slack does."""
    figures = await chaos(
        messages=40, threads=4, kills=0, redis_kills=3, seed=3, settle=60, durability="fsync"
    )
    report = figures.report()
    assert figures.kills["redis"] == 3, report
    assert not figures.lost and not figures.answered_twice and not figures.run_twice, report
    assert figures.audit_chain.startswith("intact"), report


async def test_a_redis_stall_after_a_decision_is_told_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """The approved call ran, then Redis stopped answering (SIGSTOP) before its result was
    recorded: the thread is told at once that the request is kept, and once Redis is back
    the job is tried again, the call's outcome settled as unknown (never run twice) and the
    run finished with an answer."""
    redis_server = RedisServer()
    redis_server.start()
    try:
        with FakeSlack() as fake:
            run = Chaos(tmp_path, fake, redis_server, free_port(), "default", call_seconds=3)
            serve = run.processes["serve"]
            await serve.start()
            approver = asyncio.get_running_loop().create_task(run.approve_forever())
            try:
                await asyncio.sleep(2.0)
                root = await run.send("a1", None)
                await fake.await_for(lambda: "a1" in run.tally.read_text(), 30, what="the call")
                assert redis_server.proc is not None
                os.kill(redis_server.proc.pid, signal.SIGSTOP)  # while the call runs
                stopped = time.monotonic()

                def told() -> bool:
                    return any("cannot reach my storage" in t for t in texts(fake, root))

                await fake.await_for(told, 30, what="the Redis notice")
                await asyncio.sleep(max(0.0, 12 - (time.monotonic() - stopped)))
                os.kill(redis_server.proc.pid, signal.SIGCONT)
                await fake.await_for(run.all_answered, 60, what="the answer")
            finally:
                approver.cancel()
                await asyncio.gather(approver, return_exceptions=True)
                await serve.stop()
            said = texts(fake, root)
            assert sum("cannot reach my storage" in t for t in said) == 1, said
            assert sum("did not complete" in t for t in said) == 1, said
            assert run.tally.read_text().split() == ["a1"]  # ran once
    finally:
        if redis_server.proc is not None:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        redis_server.stop()


def texts(fake: FakeSlack, thread: str) -> list[str]:
    return [str(c.params.get("text")) for c in fake.posts(CHANNEL, thread)]
