"""`clawgate bench runtime`: what the executor and middleware chain cost per tool call, and
how many demo-model turns per second the whole runtime sustains."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.settings import Settings
from runtime.agent import Runtime, RuntimeConfig
from runtime.channel import Event
from runtime.executor import ToolExecutor
from runtime.models import Actor, ConversationRef, StopReason, ToolCall
from runtime.providers.demo import DemoProvider
from runtime.store.connection import connect
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tool_policy import ToolPolicyMiddleware
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from runtime.tools.registry import ToolRegistry


class NoopArgs(ToolArgs):
    value: int = 0


class NoopTool(Tool[NoopArgs]):
    name = "noop"
    description = "Does nothing."
    args_model = NoopArgs

    async def run(self, args: NoopArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ok")


class NullChannel:
    async def send(self, conversation: ConversationRef, event: Event) -> None:
        return None


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _time_each(n: int, fn: Callable[[], Awaitable[object]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        await fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def _registry() -> ToolRegistry:
    registry = ToolRegistry([NoopTool()])
    registry.use(ToolPolicyMiddleware(deny=["bash"]))  # the default chain's first link
    return registry


async def bench_tool_calls(calls: int, workdir: Path) -> dict[str, float]:
    registry = _registry()
    executor = ToolExecutor(registry)
    ctx = ToolContext(session="bench", workdir=workdir)
    tool, args = NoopTool(), NoopArgs(value=1)
    call = ToolCall(id="call_1", name="noop", arguments='{"value": 1}')
    warmup = max(100, calls // 10)
    await _time_each(warmup, lambda: tool.run(args, ctx))
    await _time_each(warmup, lambda: executor.execute([call], ctx))
    direct = await _time_each(calls, lambda: tool.run(args, ctx))
    chained = await _time_each(calls, lambda: executor.execute([call], ctx))
    return {
        "direct_p50": percentile(direct, 0.5),
        "direct_p99": percentile(direct, 0.99),
        "chain_p50": percentile(chained, 0.5),
        "chain_p99": percentile(chained, 0.99),
    }


async def bench_turns(turns: int, settings: Settings, workdir: Path) -> tuple[float, list[float]]:
    redis = connect(settings.redis_url)
    prefix = f"{settings.redis_prefix}:bench:{time.time_ns()}"
    try:
        history = HistoryStore(redis, Keys(prefix))
        runtime = Runtime(
            RuntimeConfig(workdir=workdir), DemoProvider(), _registry(), history, NullChannel()
        )
        actor, conversation = (
            Actor(platform="bench", user_id="bench"),
            ConversationRef(platform="bench"),
        )
        samples = []
        started = time.perf_counter()
        for i in range(turns):
            t0 = time.perf_counter_ns()
            result = await runtime.run(f"bench:{i % 50}", "call noop {}", actor, conversation)
            samples.append((time.perf_counter_ns() - t0) / 1000)
            if result.stop_reason is not StopReason.FINAL:
                raise RuntimeError(f"bench turn ended with {result.stop_reason}")
        elapsed = time.perf_counter() - started
        keys = [k async for k in redis.scan_iter(match=f"{prefix}:*")]
        if keys:
            await redis.delete(*keys)
        return turns / elapsed, samples
    finally:
        await redis.aclose()


async def run_bench(settings: Settings, target: str, calls: int, turns: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        r = await bench_tool_calls(calls, workdir)
        overhead = r["chain_p50"] - r["direct_p50"]
        for label, key in (("direct", "direct"), ("executor+chain", "chain")):
            print(
                f"tool call, {label:<15} p50 {r[key + '_p50']:8.1f} us   "
                f"p99 {r[key + '_p99']:8.1f} us"
            )
        print(
            f"chain overhead per call    p50 {overhead:8.1f} us   "
            f"ratio {r['chain_p50'] / r['direct_p50']:.1f}x   (target p50 <= 100 us)"
        )
        rate, samples = await bench_turns(turns, settings, workdir)
        store = "redis " + settings.redis_url if settings.redis_url else "embedded store"
        print(
            f"turns (demo model, {store}): {rate:8.0f} turns/s   "
            f"p50 {percentile(samples, 0.5):8.1f} us   p99 {percentile(samples, 0.99):8.1f} us"
        )
    return 0
