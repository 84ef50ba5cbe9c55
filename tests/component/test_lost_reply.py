"""A write Redis made but whose reply never came back (the server was killed, the link cut
just after the command): clawgate's client must not send it again by itself, or a history
append is done twice. Through a real TCP proxy in front of the tests' Redis (each master of
the cluster under TEST_REDIS_CLUSTER=1) that passes the command on and drops the reply."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import cast

import pytest
from redis.asyncio.cluster import RedisCluster

from runtime.models import UserMessage
from runtime.store.connection import OUTAGES, connect, is_cluster
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from tests.conftest import CLUSTER, client_for


class ReplyDropper:
    """Forwards a client's bytes to Redis and Redis's back, except: the first time a chunk
    holds `command`, the connection is cut once Redis has answered it, the answer unsent."""

    def __init__(self, target: tuple[str, int], command: bytes) -> None:
        self.target = target
        self.command = command
        self.armed = True
        self.dropped = 0
        self.server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self.target)
        back = asyncio.create_task(self._pipe(server_r, client_w))
        try:
            while chunk := await client_r.read(65536):
                if self.armed and self.command in chunk:
                    self.armed = False
                    back.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await back
                    server_w.write(chunk)
                    await server_w.drain()
                    await server_r.read(65536)  # Redis did it and answered; the answer is lost
                    self.dropped += 1
                    break
                server_w.write(chunk)
                await server_w.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            back.cancel()
            for writer in (client_w, server_w):
                writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()


@pytest.fixture
async def proxies(redis_url: str) -> AsyncIterator[dict[tuple[str, int], ReplyDropper]]:
    """A reply-dropping proxy per Redis server (per master on a cluster), by its address."""
    direct = client_for(redis_url)
    await direct.flushdb()
    if CLUSTER:
        targets = [(node.host, node.port) for node in direct.get_nodes()]  # type: ignore[attr-defined]
    else:
        pool_kwargs = direct.connection_pool.connection_kwargs
        targets = [(str(pool_kwargs["host"]), int(pool_kwargs["port"]))]
    await direct.aclose()
    found = {target: ReplyDropper(target, b"RPUSH") for target in targets}
    for proxy in found.values():
        await proxy.start()
    yield found
    for proxy in found.values():
        await proxy.stop()


async def test_an_append_whose_reply_is_lost_is_done_once_and_said_as_an_outage(
    redis_url: str, proxies: dict[tuple[str, int], ReplyDropper]
) -> None:
    if CLUSTER:
        client = connect(redis_url, cluster=True)
        assert is_cluster(client)
        # The cluster names its masters' real addresses; they are reached through the proxies.
        cluster = cast(RedisCluster, client)
        cluster.nodes_manager.address_remap = lambda at: proxies[at].address
        # Slots read now, through the proxies: a first command sent before would be redirected
        # (MOVED) to a master's real address, past its proxy.
        await cluster.initialize()
    else:
        (proxy,) = proxies.values()
        host, port = proxy.address
        client = connect(f"redis://{host}:{port}/0")
    history = HistoryStore(client, Keys("lost-reply"))
    direct = HistoryStore(client_for(redis_url), Keys("lost-reply"))
    try:
        await history.length("s1")  # connected before the cut

        with pytest.raises(OUTAGES):
            await history.append("s1", UserMessage(content="once"))

        assert sum(p.dropped for p in proxies.values()) == 1
        # Redis holds the message once: the caller (a worker) retakes the job from there.
        assert [m.content for m in await direct.load("s1")] == ["once"]
        # The client recovers by itself for the next command.
        assert await history.append("s1", UserMessage(content="next")) == 2
        assert [m.content for m in await direct.load("s1")] == ["once", "next"]
    finally:
        await client.aclose()
        await direct.redis.aclose()
