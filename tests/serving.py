"""What the `clawgate serve` end-to-end tests share, whatever the platform.

`running` starts a service (runtime + worker + adapters) behind a real HTTP server; `Served` is
the base of each test file's harness and tells what is queued in Redis; `own_redis` is a
redis-server a test may kill; `load_settings_in`, `assert_settings_errors` and `run_serve`
check how bad settings fail at start.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp.test_utils import TestServer
from redis.exceptions import RedisError

from bot.server import Service, build_app, build_service
from bot.settings import Settings, SettingsError, load_settings
from bot.wiring import load_policy
from tests.conftest import _unavailable, free_port
from tests.threaded_server import ThreadedServer

F = TypeVar("F", bound=ThreadedServer)


# ---------------------------------------------------------------------------------------------
# A service behind a real HTTP server
# ---------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(
    settings: Settings, *, worker: bool, start_worker: bool = True, port: int | None = None
) -> AsyncIterator[tuple[Service, TestServer]]:
    """The service `bot.server` builds for `settings`, served on `port` (default a free one);
    its in-process worker (with `worker`) is started unless `start_worker` is false."""
    service = await build_service(settings, load_policy(settings), worker=worker)
    server = TestServer(build_app(service), host="127.0.0.1", port=port or free_port())
    await server.start_server()
    if start_worker and service.worker is not None:
        await service.worker.start()
    try:
        yield service, server
    finally:
        if service.worker is not None:
            await service.worker.stop(1)
        await server.close()
        await service.aclose()


@dataclass
class Served(Generic[F]):
    """A running service, the fake platform it talks to, and what is queued in its Redis."""

    fake: F
    service: Service
    server: TestServer
    workdir: Path
    prefix: str
    settings: Settings

    @property
    def redis(self) -> aioredis.Redis:
        return self.service.redis

    async def get(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.server.make_url(path)) as resp,
        ):
            return resp.status, await resp.text()

    async def enqueued(self) -> int:
        """Inputs ever appended to the inbox's streams (handled ones are deleted from them)."""
        return sum(await self.service.inbox.spread())

    async def seen_keys(self) -> list[str]:
        """Dedupe marks, of every inbox partition (`{inbox}` or `{inbox-…}`)."""
        match = f"{self.prefix}:{{inbox*}}:seen:*"
        return [key async for key in self.redis.scan_iter(match)]

    async def drained(self) -> None:
        """Wait until every queued input was handled and acknowledged."""

        async def empty() -> bool:
            waiting, in_hand = await self.service.inbox.depth()
            lengths = [await self.redis.xlen(stream) for stream in self.service.inbox.streams]
            return waiting == 0 and in_hand == 0 and sum(lengths) == 0

        await self.fake.await_for(empty, 15, what="an empty inbox")

    async def history_length(self, session: str) -> int:
        return await self.service.runtime.history.length(session)


# ---------------------------------------------------------------------------------------------
# A redis-server of the test's own
# ---------------------------------------------------------------------------------------------


@dataclass
class OwnRedis:
    url: str
    proc: subprocess.Popen[bytes]

    def kill(self) -> None:
        """SIGKILL the server (Redis goes down under the service) and reap it."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@contextlib.asynccontextmanager
async def own_redis(tmp_path: Path, fake: ThreadedServer) -> AsyncIterator[OwnRedis]:
    """A throwaway redis-server in `tmp_path`, up and answering pings (`fake` does the waiting).
    Without the binary the test is skipped (failed under CI)."""
    binary = shutil.which("redis-server")
    if binary is None:
        _unavailable("redis-server is not installed: this test starts and kills its own")
    assert binary is not None
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        await _wait_until_up(url, fake)
        yield OwnRedis(url, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


async def _wait_until_up(url: str, fake: ThreadedServer) -> None:
    probe = aioredis.from_url(url)

    async def up() -> bool:
        try:
            return bool(await probe.ping())
        except RedisError:
            return False

    try:
        await fake.await_for(up, 10, what="redis-server to start")
    finally:
        await probe.aclose()


# ---------------------------------------------------------------------------------------------
# Settings that fail at start
# ---------------------------------------------------------------------------------------------


def load_settings_in(
    monkeypatch: pytest.MonkeyPatch, cwd: Path, unset: Iterable[str], env: Mapping[str, str]
) -> Settings:
    """`load_settings()` run from `cwd` with the `unset` variables removed and `env` set."""
    monkeypatch.chdir(cwd)
    for var in unset:
        monkeypatch.delenv(var, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def assert_settings_errors(
    monkeypatch: pytest.MonkeyPatch,
    cwd: Path,
    unset: Iterable[str],
    env: Mapping[str, str],
    expected: Sequence[str],
) -> None:
    """`load_settings_in` fails with one line per problem, starting as `expected` says."""
    with pytest.raises(SettingsError) as raised:
        load_settings_in(monkeypatch, cwd, unset, env)
    lines = str(raised.value).splitlines()
    assert len(lines) == len(expected), lines
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), lines


def run_serve(command: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`<command> serve` in an empty directory, to its end (at most 60 s), output captured."""
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run(
            [*command, "serve"],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
