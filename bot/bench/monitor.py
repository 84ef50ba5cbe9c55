"""Redis commands the processes under test send, counted with MONITOR (`clawgate bench
ingest`, over its end-to-end phase only: MONITOR costs Redis CPU of its own, which the Redis
CPU figure of that phase then holds).

Commands run inside Lua scripts (`[0 lua]` lines) are not counted: a script is one command,
its EVALSHA. MONITOR shows each command of a pipeline on its own; round trips count a pipeline
once: commands of one connection that Redis ran one right after the other (no other client's
between, under PIPELINE_GAP_S apart: MONITOR's own work on a long argument or a script's
commands spaces them out to 0.1-0.3 ms here). That is an estimate: a client that waits for a
reply and sends again within that time, with no other client's command between, is counted
once (the runtime's own count, on its connections, is `clawgate bench runtime --model-server`).
A command is
put to the process whose socket has its client port (/proc/<pid>/fd and /proc/<pid>/net/tcp,
Linux only), so the bench's own connections, and other clients of the same Redis, are left
out. One Redis server only: a cluster's commands are not counted."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bot.bench.store import BenchStore

END = "clawgate-bench-monitor-end"  # echoed by the bench: every command before it was seen
PIPELINE_GAP_S = 1e-3


@dataclass
class RedisCommands:
    """Commands seen, by the process kind that sent them ("server", "worker") and name."""

    by_process: dict[str, Counter[str]] = field(default_factory=dict)
    trips: Counter[str] = field(default_factory=Counter)  # round trips, by process kind

    def per_turn(self, turns: int) -> dict[str, Any]:
        def rate(n: int) -> float:
            return round(n / max(1, turns), 2)

        names: Counter[str] = sum(self.by_process.values(), Counter())
        return {
            "total": rate(sum(names.values())),
            "round_trips": rate(sum(self.trips.values())),
            "by_process": {kind: rate(sum(c.values())) for kind, c in self.by_process.items()},
            "round_trips_by_process": {kind: rate(n) for kind, n in self.trips.items()},
            "commands": {name: rate(n) for name, n in names.most_common()},
        }


def socket_ports(pid: int) -> set[int]:
    """The local TCP ports of the sockets process `pid` holds open."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class _Watch:
    def __init__(self, db: int) -> None:
        self.db = db
        self.by_port: Counter[tuple[int, str]] = Counter()
        self.trips: Counter[int] = Counter()  # by client port

    async def read(self, monitor: Any) -> None:
        last: tuple[int, float] | None = None  # the port and time of the last client command
        while True:
            info = await monitor.next_command()
            command: str = info["command"]
            if END in command:
                return
            if info["client_type"] != "tcp":  # a script's own commands: part of its EVALSHA
                continue
            port, at = int(info["client_port"]), float(info["time"])
            if info["db"] == self.db:
                name = command.split(" ", 1)[0].upper()
                self.by_port[(port, name)] += 1
                if last is None or last[0] != port or at - last[1] >= PIPELINE_GAP_S:
                    self.trips[port] += 1
            last = (port, at)

    def attribute(self, owner: dict[int, str]) -> RedisCommands:
        """The counts put to the process kinds, given the kind each client port belongs to."""
        seen = RedisCommands()
        for (port, name), n in self.by_port.items():
            if port in owner:
                seen.by_process.setdefault(owner[port], Counter())[name] += n
        for port, n in self.trips.items():
            if port in owner:
                seen.trips[owner[port]] += n
        return seen


@contextlib.asynccontextmanager
async def redis_commands(
    store: BenchStore, pids: dict[str, int]
) -> AsyncIterator[list[RedisCommands]]:
    """Counts the commands of the processes `pids` while open; the list holds the count once
    closed (empty on a cluster: not counted)."""
    result: list[RedisCommands] = []
    if store.cluster:
        yield result
        return
    client = Redis.from_url(store.url)
    watch = _Watch(int(client.connection_pool.connection_kwargs.get("db", 0)))
    try:
        async with client.monitor() as monitor:
            reader = asyncio.create_task(watch.read(monitor))
            try:
                yield result
                # whose ports, while the processes run
                owner = {port: kind for kind, pid in pids.items() for port in socket_ports(pid)}
                await client.echo(END)
                await asyncio.wait_for(reader, 30)
                result.append(watch.attribute(owner))
            finally:
                reader.cancel()
    finally:
        await client.aclose()
