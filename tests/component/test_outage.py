"""A Redis outage is said once per process (runtime/outage.py): the first failure, then, once
a real Redis answers again, that it is back with the retries in between; a failure that is no
outage is left to its caller."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError

from runtime.outage import Outage
from runtime.store.durability import durability_warnings
from tests.conftest import free_port


def client_of(port: int) -> aioredis.Redis:
    """A client that fails at once (no retries of its own), as the loops' clients do."""
    return aioredis.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


@pytest.fixture
def port() -> Iterator[int]:
    yield free_port()


def start_redis(port: int) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is needed (`.ci/run` installs it)"
    return subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )


async def test_an_outage_is_two_lines_however_many_loops_fail(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    client = client_of(port)
    outage = Outage()
    outage.watch(client)
    caplog.set_level(logging.WARNING, logger="runtime.outage")
    for what in ("inbox read", "liveness mark", "inbox read", "approval sweep"):
        try:
            await client.ping()
        except Exception as exc:
            assert outage.failed(what, exc)
    (first,) = caplog.messages
    assert first.startswith("Redis unreachable (inbox read: Error 111 connecting")
    server = start_redis(port)
    try:
        for _ in range(100):
            if outage.since is None:
                break
            await asyncio.sleep(0.1)
        assert caplog.messages[1:] == [caplog.messages[1]]
        assert caplog.messages[1].startswith("Redis is back after ")
        assert caplog.messages[1].endswith(" s (3 retries meanwhile)")
        assert not outage.failed("inbox read", ResponseError("NOGROUP"))  # not an outage
        assert len(caplog.messages) == 2
    finally:
        await client.aclose()
        server.kill()
        server.wait(10)


async def test_without_a_client_to_ask_each_failure_is_a_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process that named no client (no probe could say it is back) keeps a line each."""
    caplog.set_level(logging.WARNING, logger="runtime.outage")
    outage = Outage()
    client = client_of(free_port())
    for _ in range(2):
        try:
            await client.ping()
        except Exception as exc:
            assert outage.failed("inbox read", exc)
    await client.aclose()
    assert len(caplog.messages) == 2 and all("Redis unreachable" in m for m in caplog.messages)


async def test_the_durability_check_says_unreachable_when_redis_does_not_answer() -> None:
    """Not "CONFIG GET refused" (a managed service's answer) when nothing answered at all."""
    client = client_of(free_port())
    try:
        (said,) = await durability_warnings(client)
    finally:
        await client.aclose()
    assert said.startswith("cannot check Redis's persistence settings: Redis is unreachable (")
    assert "CONFIG GET refused" not in said
