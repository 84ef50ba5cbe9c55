"""`clawgate bench ingest --workers 1,2,…`: how the number of `clawgate worker` processes
changes throughput, on one Redis or a Redis Cluster, and how ingest spread over the inbox's
partitions (and so over a cluster's masters).

For each worker count K, with a fresh key prefix: `clawgate serve` without its worker takes
`--backlog` signed events (open loop at FILL_RATE, spread over ACK_CONVERSATIONS
conversations, each acknowledged by HTTP 200) while no worker runs; then K `clawgate worker`
processes start and drain them. Throughput is the steady rate at which they were handled
(from 10 % to 90 % of the backlog, so the workers' start-up does not count); the spread is
how many events each partition's stream received (XINFO STREAM entries-added). Then the same
end-to-end closed loops as the plain bench (`--threads` conversations x `--turns`) run with
the K workers: turns per second and latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

from bot.bench.errors import BenchError
from bot.bench.ingest import _connector, _conversation_loop, _open_loop
from bot.bench.platforms import (
    ACK_CONVERSATIONS,
    DRAIN_TIMEOUT,
    PLATFORMS,
    REQUEST_TIMEOUT,
    Platform,
    fake_api,
)
from bot.bench.runtime import _line, percentile
from bot.bench.server_under_test import delete_prefix, free_port, process, server_env, wait_ready
from bot.bench.store import BenchStore, masters_of, queued

FILL_RATE = 500  # events/s while the backlog is taken: what `serve` alone acknowledges fast
DEFAULT_BACKLOG = 2000


@dataclass
class WorkersStep:
    workers: int
    backlog: int
    fill_s: float = 0.0
    drain_s: float = 0.0  # from the workers' start to an empty inbox
    handled_per_s: float = 0.0  # steady state: 10 % to 90 % of the backlog
    spread: list[int] = field(default_factory=list)  # events per partition
    masters: list[str] = field(default_factory=list)  # the master of each partition
    e2e_us: list[float] = field(default_factory=list)
    e2e_turns: int = 0
    e2e_s: float = 0.0

    def per_master(self) -> dict[str, tuple[int, int]]:
        """master -> (partitions, events)."""
        found: dict[str, tuple[int, int]] = {}
        for master, events in zip(self.masters, self.spread, strict=True):
            partitions, total = found.get(master, (0, 0))
            found[master] = (partitions + 1, total + events)
        return found

    def figures(self) -> dict[str, Any]:
        e2e: dict[str, Any] = {"turns": self.e2e_turns}
        if self.e2e_us:
            e2e |= {
                "turns_per_s": round(self.e2e_turns / self.e2e_s, 1),
                "p50_ms": round(percentile(self.e2e_us, 0.5) / 1000, 2),
                "p99_ms": round(percentile(self.e2e_us, 0.99) / 1000, 2),
            }
        return {
            "workers": self.workers,
            "backlog": self.backlog,
            "fill_s": round(self.fill_s, 2),
            "drain_s": round(self.drain_s, 2),
            "handled_per_s": round(self.handled_per_s, 1),
            "partitions": self.spread,
            "masters": {
                name: {"partitions": p, "events": n} for name, (p, n) in self.per_master().items()
            },
            "end_to_end": e2e,
        }


async def bench_workers(
    store: BenchStore,
    prefix: str,
    *,
    counts: Sequence[int],
    backlog: int = DEFAULT_BACKLOG,
    platform: str = "slack",
    threads: int = 50,
    turns: int = 20,
    out: Callable[[str], None] = print,
) -> list[WorkersStep]:
    spec = PLATFORMS[platform]
    steps = []
    with tempfile.TemporaryDirectory(prefix="clawgate-bench-") as tmp:
        async with fake_api(spec) as (fake_url, _):
            for count in counts:
                step_prefix = f"{prefix}-w{count}"
                workdir = Path(tmp) / f"w{count}"
                workdir.mkdir()
                try:
                    step = await _one(
                        spec, store, step_prefix, fake_url, workdir, count, backlog, threads, turns
                    )
                finally:
                    await delete_prefix(store, step_prefix)
                for line in step_lines(step, threads, turns):
                    out(line)
                steps.append(step)
    return steps


async def _one(
    spec: Platform,
    store: BenchStore,
    prefix: str,
    fake_url: str,
    workdir: Path,
    count: int,
    backlog: int,
    threads: int,
    turns: int,
) -> WorkersStep:
    step = WorkersStep(count, backlog)
    events = spec.events()
    port = free_port()
    env = server_env(spec, store, prefix, fake_url, port, workdir)
    env["CLAWGATE_WORKER_MODE"] = "none"
    url = f"http://127.0.0.1:{port}"
    redis = store.connect()
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    try:
        async with (
            process("serve", env, workdir) as serve,
            aiohttp.ClientSession(connector=_connector(), timeout=timeout) as session,
        ):
            await wait_ready(url, serve, workdir / "serve.log", "/healthz")  # no worker yet
            events_url = f"{url}{spec.events_path}"
            requests = events.spread(backlog, min(ACK_CONVERSATIONS, backlog))
            filled = await _open_loop(session, events_url, requests, FILL_RATE)
            if filled.errors or filled.ok != filled.sent:
                raise BenchError(f"the backlog was not all accepted: {dict(filled.errors)}")
            step.fill_s = filled.span_s
            streams = store.streams(prefix)
            step.spread = await _entries_added(redis, streams)
            step.masters = await masters_of(redis, streams)
            async with contextlib.AsyncExitStack() as workers:
                started = time.monotonic()
                for n in range(1, count + 1):
                    await workers.enter_async_context(
                        process("worker", env, workdir, f"worker-{n}")
                    )
                samples = await _handled_over_time(redis, streams, backlog, started)
                step.drain_s = samples[-1][0] if samples else 0.0
                step.handled_per_s = steady_rate(samples, backlog)
                await wait_ready(url, serve, workdir / "serve.log")  # its workers poll
                e2e_started = time.monotonic()
                loops = [
                    _conversation_loop(session, events_url, fake_url, events, 20_000 + i, turns)
                    for i in range(threads)
                ]
                step.e2e_us = [s for samples in await asyncio.gather(*loops) for s in samples]
                step.e2e_s = time.monotonic() - e2e_started
                step.e2e_turns = threads * (turns + 1)
    finally:
        await redis.aclose()
    return step


async def _entries_added(redis: Redis, streams: list[str]) -> list[int]:
    pipe = redis.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_stream(stream)
    replies = await pipe.execute(raise_on_error=False)
    return [0 if isinstance(r, Exception) else int(r.get("entries-added", 0)) for r in replies]


async def _handled_over_time(
    redis: Redis, streams: list[str], backlog: int, started: float
) -> list[tuple[float, int]]:
    """(seconds since `started`, events handled) every 50 ms until none is left."""
    samples: list[tuple[float, int]] = []
    while True:
        left = await queued(redis, streams)
        now = time.monotonic() - started
        samples.append((now, backlog - left))
        if not left:
            return samples
        if now > DRAIN_TIMEOUT:
            raise BenchError(f"the workers still had {left} events queued after {now:.0f} s")
        await asyncio.sleep(0.05)


def steady_rate(samples: Sequence[tuple[float, int]], backlog: int) -> float:
    """Events per second between the samples that first reached 10 % and 90 % handled; for a
    backlog drained between two samples, from the last sample with none handled to the first
    with all."""
    low = next((t for t, n in samples if n >= backlog * 0.1), None)
    high = next((t for t, n in samples if n >= backlog * 0.9), None)
    if low is None or high is None:
        return 0.0
    if high > low:
        return backlog * 0.8 / (high - low)
    start = max((t for t, n in samples if n == 0), default=samples[0][0])
    end = next(t for t, n in samples if n >= backlog) if samples[-1][1] >= backlog else high
    return backlog / (end - start) if end > start else 0.0


def step_lines(step: WorkersStep, threads: int, turns: int) -> list[str]:
    workers = f"{step.workers} worker{'s' if step.workers != 1 else ''}"
    lines = [
        f"{workers}: {step.backlog} queued events handled at {step.handled_per_s:.0f}/s "
        f"(steady, 10-90 %), all within {step.drain_s:.1f} s of the workers' start",
        f"     per partition ({len(step.spread)}): " + " ".join(map(str, step.spread)),
    ]
    if len(step.per_master()) > 1:
        lines.append(
            "     per master: "
            + ", ".join(
                f"{name} {p} partitions {n} events" for name, (p, n) in step.per_master().items()
            )
        )
    if step.e2e_us:
        lines.append(
            _line(f"     end to end, {threads} x {turns} turns", step.e2e_us)
            + f"   ({step.e2e_turns / step.e2e_s:.0f} turns/s)"
        )
    return lines
