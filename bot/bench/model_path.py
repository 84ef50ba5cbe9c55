"""`clawgate bench runtime --model-server`: demo-model turns replaced by the real path, the
`openai` client (OpenAIProvider, non-streaming) over HTTP to a local OpenAI-compatible fake
the bench starts (bot/bench/model_server.py), in sessions that already hold N messages, for
each N of `--history`.

Each N gets a prototype session (N ordinary messages, as `bench approval` makes them, then
one turn as the thread's previous one, which compacts it when it is over the context budget);
each timed turn (a message, the model's call of the no-op tool, its answer) runs in a fresh
copy of it, made and removed untimed and uncounted, and the lengths take turns. Per turn:
wall p50/p99, CPU (the process's, less the fake's handler CPU: the fake's HTTP reading stays
in, so the figure is a little high), Redis round trips counted on the client (a pipeline or
an EVALSHA is one; only with REDIS_URL, the embedded store's are not counted), and what the
fake was sent."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.bench.approval import copy_session, filler, remove_session
from bot.bench.model_server import ServerCounts, model_server
from bot.bench.runtime import ACTOR, CONVERSATION, bench_runtime, percentile
from bot.bench.wire import WireCounter
from bot.settings import Settings
from runtime.agent import Runtime
from runtime.models import StopReason
from runtime.providers.openai_provider import OpenAIProvider

DEFAULT_HISTORY = [10, 400]
ASK = "please call noop"
FILL_CHUNK = 1_000


@dataclass
class Thread:
    """One history length's prototype session and what its turns measured."""

    prior: int
    proto: str
    summary: bool = False
    length: int = 0
    walls: list[float] = field(default_factory=list)  # microseconds
    cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    trips: int = 0
    requests: int = 0
    messages: int = 0  # sent to the model, over all requests

    def figures(self, counted: bool) -> dict[str, Any]:
        turns = len(self.walls)
        return {
            "messages": self.length,
            "summary": self.summary,
            "turns": turns,
            "wall_p50_us": round(percentile(self.walls, 0.5), 1),
            "wall_p99_us": round(percentile(self.walls, 0.99), 1),
            # One turn after another: the rate the wall time allows, copies left out.
            "turns_per_second": round(turns / (sum(self.walls) / 1e6), 1),
            "cpu_ms_per_turn": round((self.cpu_s - self.server_cpu_s) * 1e3 / turns, 3),
            "model_server_cpu_ms_per_turn": round(self.server_cpu_s * 1e3 / turns, 3),
            "redis_round_trips_per_turn": round(self.trips / turns, 2) if counted else None,
            "model_requests_per_turn": round(self.requests / turns, 2),
            "messages_per_model_request": round(self.messages / max(1, self.requests), 1),
        }


async def _finished(runtime: Runtime, session: str) -> None:
    result = await runtime.run(session, ASK, ACTOR, CONVERSATION)
    if result.stop_reason is not StopReason.FINAL:
        raise RuntimeError(f"bench turn ended with {result.stop_reason}")


async def prepare(runtime: Runtime, prior: int) -> Thread:
    redis, keys = runtime.history.redis, runtime.history.keys
    proto = f"bench:m{prior}"
    messages = filler(prior)
    for start in range(0, len(messages), FILL_CHUNK):
        await runtime.history.append(proto, *messages[start : start + FILL_CHUNK])
    await _finished(runtime, proto)
    summary = await redis.hget(keys.summary(proto), "record") is not None
    return Thread(prior, proto, summary, length=await runtime.history.length(proto))


async def measure(
    runtime: Runtime, counter: WireCounter, server: ServerCounts, thread: Thread, i: int
) -> None:
    """One turn in a fresh copy of the thread's prototype, removed after."""
    session = f"{thread.proto}:{i}"
    await copy_session(runtime, thread.proto, session, thread.summary)
    trips, requests, messages = counter.trips, server.requests, server.messages
    server_cpu, cpu, t0 = server.cpu_s, time.process_time(), time.perf_counter_ns()
    await _finished(runtime, session)
    thread.walls.append((time.perf_counter_ns() - t0) / 1000)
    thread.cpu_s += time.process_time() - cpu
    thread.server_cpu_s += server.cpu_s - server_cpu
    thread.trips += counter.trips - trips
    thread.requests += server.requests - requests
    thread.messages += server.messages - messages
    await remove_session(runtime, session, None)


async def run_model_path_bench(
    settings: Settings, workdir: Path, turns: int, history: list[int]
) -> dict[str, Any]:
    """Figures of `clawgate bench runtime --model-server`, by history length."""
    figures: dict[str, Any] = {
        "store": "redis" if settings.redis_url else "embedded",
        "context_budget": settings.context_budget,
        "turns": turns,
        "history": {},
    }
    async with model_server(tool="noop") as (base_url, server):
        provider = OpenAIProvider("bench", base_url=base_url, timeout=settings.model_timeout)
        async with bench_runtime(settings, workdir, gated=False, provider=provider) as runtime:
            counter = WireCounter()
            counted = bool(settings.redis_url) and await counter.install(runtime.history.redis)
            threads = [await prepare(runtime, prior) for prior in history]
            gc.collect()
            gc.freeze()  # as `clawgate serve` does after start-up
            try:
                warm = max(3, turns // 10)  # turns that warm up, untimed
                for i in range(warm + turns):
                    for thread in threads:
                        if i == warm:
                            thread.walls, thread.cpu_s, thread.server_cpu_s = [], 0.0, 0.0
                            thread.trips = thread.requests = thread.messages = 0
                        await measure(runtime, counter, server, thread, i)
                for thread in threads:
                    figures["history"][str(thread.prior)] = thread.figures(counted)
            finally:
                gc.unfreeze()
                for thread in threads:
                    await remove_session(runtime, thread.proto, None)
            await provider.client.close()
        figures["model_requests"] = server.requests
    return {"model_server_turn": figures}


def model_path_lines(document: dict[str, Any]) -> list[str]:
    figures = document["model_server_turn"]
    lines = [
        f"real-model turn (openai client -> local fake model server, {figures['store']}, "
        f"context budget {figures['context_budget']} characters, {figures['turns']} turns each; "
        f"the fake answered {figures['model_requests']} requests)",
        f"{'prior':>7} {'sent':>6}  {'wall p50/p99 ms':>17}  {'turns/s':>8}  {'CPU ms/turn':>11}  "
        f"{'fake CPU ms':>11}  {'Redis trips/turn':>16}",
    ]
    for prior, row in figures["history"].items():
        trips = row["redis_round_trips_per_turn"]
        lines.append(
            f"{prior:>7} {row['messages_per_model_request']:>6.0f}  "
            f"{row['wall_p50_us'] / 1000:>7.2f} /{row['wall_p99_us'] / 1000:>7.2f}  "
            f"{row['turns_per_second']:>8.1f}  {row['cpu_ms_per_turn']:>11.2f}  "
            f"{row['model_server_cpu_ms_per_turn']:>11.2f}  "
            f"{'not counted' if trips is None else f'{trips:.1f}':>16}"
        )
    if figures["store"] != "redis":
        lines.append("Redis round trips are not counted on the embedded store (set REDIS_URL)")
    return lines
