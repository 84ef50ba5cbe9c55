"""What a bench's Redis client sends: bytes and round trips, counted on the client side."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis


class WireCounter:
    """Counts what the client writes to Redis, on every connection of its pool (made after
    `install`): `sent`, the bytes of commands with their arguments; `trips`, the writes that
    wait for a reply: a command, a pipeline or an `EVALSHA` is one each (so are the handshake
    and health-check commands redis-py sends on its own). Counted here rather than by the
    server's INFO commandstats, which also counts the commands a script runs inside."""

    def __init__(self) -> None:
        self.sent = 0
        self.trips = 0

    async def install(self, redis: Redis) -> bool:
        """False when the client has no single pool to count on (a cluster client)."""
        pool = getattr(redis, "connection_pool", None)
        if pool is None or not hasattr(pool, "connection_class"):
            return False
        counter = self
        base = pool.connection_class

        class Counting(base):  # type: ignore[valid-type, misc]
            async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
                if isinstance(command, bytes | bytearray | memoryview | str):
                    counter.sent += len(command)
                else:
                    counter.sent += sum(len(chunk) for chunk in command)
                counter.trips += 1
                await super().send_packed_command(command, check_health)

        pool.connection_class = Counting
        await pool.disconnect()  # connections made so far would not count
        return True
