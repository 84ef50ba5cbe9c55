"""Shared fixtures: a throwaway real Redis server, a fake OpenAI-compatible server, a workdir.

With TEST_REDIS_CLUSTER=1 the Redis fixtures hand out a local Redis Cluster of three
masters instead (tests/cluster.py): `redis_url` names one of its nodes, `redis` is a cluster
client, and CLAWGATE_REDIS_CLUSTER=true is set for the settings the tests build.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis as syncredis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from tests.cluster import LocalCluster
from tests.fake_openai import FakeOpenAI
from tests.support import PREFIX

# The Redis-facing tests against a local Redis Cluster instead of one server (see .ci/run).
CLUSTER = os.environ.get("TEST_REDIS_CLUSTER", "") == "1"
ROOT = Path(__file__).resolve().parents[1]
SLOW_TIERS = {"e2e", "browser"}  # folders of tests/ whose tests are the slow tier

# The user's own settings file and state (~/.config/clawgate/env, the chat's history) are the
# tests' own: a developer's `clawgate init` must not change what a test reads.
for _var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):
    os.environ[_var] = tempfile.mkdtemp(prefix=f"clawgate-test-{_var.lower()}-")

# slack_sdk and openai honour proxy variables; tests only ever talk to 127.0.0.1.
for _var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_var, None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """As `clawgate serve` does after start-up: the thousands of objects the SDKs and the test
    modules create at import are moved out of the collector's way, so that a test's
    `gc.collect()` (see `fake_openai`) costs what its own objects cost, not 0.3 s."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)  # before `-m "not e2e"` deselects by the marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test's tier is its folder: those of tests/e2e and tests/browser are `e2e` (the slow
    tier), whatever their module says; tests/unit and tests/component hold none
    (tests/unit/test_tiers.py). Under TEST_REDIS_CLUSTER=1 only the Redis-facing tests run
    (those given the tests' Redis, whose fixtures all start from `redis_url`): the rest has
    nothing a cluster changes, and ran already in the same CI job."""
    for item in items:
        if SLOW_TIERS & set(item.path.relative_to(ROOT).parts[:2]):
            item.add_marker(pytest.mark.e2e)
    if not CLUSTER:
        return
    facing = [item for item in items if "redis_url" in getattr(item, "fixturenames", ())]
    if len(facing) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in facing])
        items[:] = facing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unavailable(reason: str, what: str = "Redis") -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (under CI a missing {what} is a failure, not a skip)")
    pytest.skip(reason)


def client_for(url: str) -> aioredis.Redis:
    """A client for the tests' Redis: a cluster client under TEST_REDIS_CLUSTER=1 (typed
    as Redis, as runtime/store/connection.py hands it out)."""
    if CLUSTER:
        client: aioredis.Redis = RedisCluster.from_url(url, decode_responses=True)  # type: ignore[assignment]
        return client
    return aioredis.from_url(url, decode_responses=True)


def sync_client_for(url: str) -> syncredis.Redis:
    """`client_for`, blocking."""
    if CLUSTER:
        client: syncredis.Redis = syncredis.RedisCluster.from_url(url, decode_responses=True)  # type: ignore[assignment]
        return client
    return syncredis.Redis.from_url(url, decode_responses=True)


def keeps_cluster_setting(name: str) -> bool:
    """For fixtures that clear CLAWGATE_* settings: under TEST_REDIS_CLUSTER=1 the flag stays."""
    return CLUSTER and name == "CLAWGATE_REDIS_CLUSTER"


def _cluster_url() -> Iterator[str]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        _unavailable("TEST_REDIS_CLUSTER=1 needs redis-server and redis-cli")
    # No AOF: these tests restart no master (tests/e2e/test_cluster.py starts its own).
    cluster = LocalCluster(aof=False)
    try:
        cluster.start()
    except RuntimeError as exc:
        cluster.stop()
        pytest.fail(f"the local Redis Cluster did not start: {exc}")
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _cluster_settings(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under TEST_REDIS_CLUSTER=1, a test given the tests' Redis URL builds settings (and
    processes: tests/processes.py) that know it names a cluster."""
    if CLUSTER and "redis_url" in request.fixturenames:
        monkeypatch.setenv("CLAWGATE_REDIS_CLUSTER", "true")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A throwaway redis-server for this test session, else $REDIS_URL; under
    TEST_REDIS_CLUSTER=1 a throwaway local cluster."""
    if CLUSTER:
        yield from _cluster_url()
        return
    binary = shutil.which("redis-server")
    if binary is None:
        url = os.environ.get("REDIS_URL")
        if not url:
            _unavailable("redis-server is not installed and REDIS_URL is not set")
        assert url is not None
        yield url
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                tmp,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                pytest.fail("redis-server did not start")
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = client_for(redis_url)
    await client.flushdb()  # on a cluster: every master's
    yield client
    await client.flushdb()
    await client.aclose()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async for server in _serving_openai():
        yield server


@pytest.fixture
async def big_model() -> AsyncIterator[FakeOpenAI]:
    """A second model server: the one a policy file's `[[models]]` entry points at."""
    async for server in _serving_openai():
        yield server


async def _serving_openai() -> AsyncIterator[FakeOpenAI]:
    server = FakeOpenAI()
    await server.start()
    yield server
    # The test's openai clients are garbage now: collect them while their event loop still
    # runs, so they close here instead of failing (and logging) in a later test's loop.
    gc.collect()
    gc.freeze()  # what lives on (modules imported late, session fixtures) is not scanned again
    await asyncio.sleep(0)
    await server.stop()


@pytest.fixture
def cli_env(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`bot.cli.main` on the tests' Redis and prefix and none of the machine's other CLAWGATE_*
    settings (a module overrides this fixture to add its own, such as an audit key)."""
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") and not keeps_cluster_setting(name):
            monkeypatch.delenv(name)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CLAWGATE_REDIS_PREFIX", PREFIX)
    return redis_url


@pytest.fixture
def empty_redis(redis_url: str) -> Iterator[None]:
    """The tests' database empty when the test starts and emptied again after it, for a test
    that reads it only through `clawgate` (without the `redis` fixture, which does the same)."""
    client = sync_client_for(redis_url)
    client.flushdb()
    yield
    client.flushdb()
    client.close()
