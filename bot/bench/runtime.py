"""`clawgate bench runtime|approval`.

runtime: what the executor and middleware chain cost per tool call against calling the tool
directly, demo-model turns per second, and a bash call in the bwrap sandbox against the same
call uncontained (plus the judge's cost for a typical command). approval: the suspend ->
approve -> resume -> final round trip through Redis, and checkpoint writes with 10 vs 10,000
prior messages."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from redis.asyncio import Redis

from bot.settings import Settings
from runtime.agent import Runtime, RuntimeConfig
from runtime.approval.store import ApprovalStore
from runtime.channel import Event
from runtime.executor import ToolExecutor
from runtime.loop import RunState, Suspension
from runtime.middleware.default import default_chain
from runtime.models import (
    Actor,
    AssistantMessage,
    ConversationRef,
    Message,
    RunResult,
    StopReason,
    ToolCall,
    ToolResult,
    ToolStatus,
    UserMessage,
)
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyService
from runtime.providers.demo import DemoProvider
from runtime.risk.policy import RiskPolicy
from runtime.store.connection import connect
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from runtime.tools.bash import BashArgs, BashTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Access, Sandbox, SandboxMode, SandboxUnavailable, probe
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore


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

    async def send_event(self, event: Event) -> None:
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


ACTOR = Actor(platform="bench", user_id="bench")
CONVERSATION = ConversationRef(platform="bench", id="bench:local")


def _policies(redis: Redis, keys: Keys, gated: bool = False) -> PolicyService:
    """Ungated, noop is a safe tool; gated, it asks (the risk policy does not know it)."""
    defaults = Defaults(enabled=("noop",), admins=frozenset([ACTOR.key]))
    document = PolicyDocument()
    document.risk.safe_tools = None if gated else ["noop"]
    return PolicyService(redis, keys, defaults, ["noop"], document)


@contextlib.asynccontextmanager
async def _bench_runtime(settings: Settings, workdir: Path, gated: bool) -> AsyncIterator[Runtime]:
    """A runtime on the demo model under a throwaway key prefix, removed afterwards."""
    redis = connect(settings.redis_url)
    keys = Keys(f"{settings.redis_prefix}-bench-{time.time_ns()}")
    try:
        approvals = ApprovalStore(redis, keys)
        policies = _policies(redis, keys, gated)
        history = HistoryStore(redis, keys)
        config = RuntimeConfig(workdir=workdir)
        # As `clawgate serve` runs: audit trail on, tracing in the configured mode.
        tracer = Tracer(settings.trace_mode, TraceStore(redis, keys, settings.trace_ttl))
        yield Runtime(
            config,
            DemoProvider(),
            ToolRegistry([NoopTool()]),
            history,
            NullChannel(),
            approvals,
            policies,
            tracer=tracer,
        )
    finally:
        stale = [k async for k in redis.scan_iter(match=f"{keys.prefix}:*")]
        if stale:
            await redis.delete(*stale)
        await redis.aclose()


async def bench_tool_calls(calls: int, settings: Settings, workdir: Path) -> dict[str, list[float]]:
    """The chain as a model step runs it: the step's policy is already on the context."""
    redis = connect(settings.redis_url)
    policies = _policies(redis, Keys("bench"))
    approvals = ApprovalStore(redis, Keys("bench"))
    executor = ToolExecutor(
        ToolRegistry([NoopTool()]), middlewares=default_chain(policies, approvals)
    )
    ctx = ToolContext(session="bench", workdir=workdir)
    ctx.policy = await policies.effective(CONVERSATION.id)
    tool, args = NoopTool(), NoopArgs(value=1)
    call = ToolCall(id="call_1", name="noop", arguments='{"value": 1}')
    warmup = max(100, calls // 10)
    await _time_each(warmup, lambda: tool.run(args, ctx))
    await _time_each(warmup, lambda: executor.execute([call], ctx))
    direct = await _time_each(calls, lambda: tool.run(args, ctx))
    chained = await _time_each(calls, lambda: executor.execute([call], ctx))
    await redis.aclose()
    return {"direct": direct, "chain": chained}


async def bench_turns(turns: int, settings: Settings, workdir: Path) -> tuple[float, list[float]]:
    async with _bench_runtime(settings, workdir, gated=False) as runtime:
        samples = []
        started = time.perf_counter()
        for i in range(turns):
            t0 = time.perf_counter_ns()
            result = await runtime.run(f"bench:{i % 50}", "call noop {}", ACTOR, CONVERSATION)
            samples.append((time.perf_counter_ns() - t0) / 1000)
            if result.stop_reason is not StopReason.FINAL:
                raise RuntimeError(f"bench turn ended with {result.stop_reason}")
        return turns / (time.perf_counter() - started), samples


async def bench_approval_round_trips(rounds: int, settings: Settings, workdir: Path) -> list[float]:
    """suspend -> decide -> resume -> final, through Redis, per round."""
    async with _bench_runtime(settings, workdir, gated=True) as runtime:
        samples = []
        for i in range(rounds):
            t0 = time.perf_counter_ns()
            asked = await runtime.run(f"bench:{i}", "call noop {}", ACTOR, CONVERSATION)
            assert asked.approval_id is not None, asked
            decision = await runtime.decide(asked.approval_id, True, ACTOR, CONVERSATION)
            samples.append((time.perf_counter_ns() - t0) / 1000)
            if decision.run is None or decision.run.stop_reason is not StopReason.FINAL:
                raise RuntimeError(f"bench round ended with {decision}")
        return samples


async def bench_checkpoint_writes(
    writes: int, prior_messages: int, settings: Settings, workdir: Path
) -> list[float]:
    """Time of the suspension step (approval record + checkpoint + the turn's history write,
    notice) in a session that already holds `prior_messages` messages."""
    async with _bench_runtime(settings, workdir, gated=True) as runtime:
        session = f"bench:cp{prior_messages}"
        filler = [UserMessage(content=f"message {i}") for i in range(prior_messages)]
        for chunk in range(0, len(filler), 1000):
            await runtime.history.append(session, *filler[chunk : chunk + 1000])
        history = await runtime.history.load(session)
        call = ToolCall(id="call_1", name="noop", arguments="{}")
        result = RunResult(session=session, stop_reason=StopReason.APPROVAL_REQUIRED, steps=1)
        samples = []
        for _ in range(writes):
            ctx = ToolContext(session, workdir, actor=ACTOR, conversation=CONVERSATION)
            state = RunState(session, history, ctx, NullChannel().send_event)
            pending = ToolResult(
                call_id="call_1",
                tool="noop",
                status=ToolStatus.SUSPENDED,
                model_text="",
                display="",
            )
            turn: list[Message] = [AssistantMessage(tool_calls=[call])]
            suspension = Suspension(1, [call], 0, [], pending, turn)
            t0 = time.perf_counter_ns()
            await runtime.suspender.suspend(state, suspension, result)
            samples.append((time.perf_counter_ns() - t0) / 1000)
        return samples


BASH_COMMAND = "ls -la && git status --short 2>/dev/null | head -5"


async def bench_bash_calls(calls: int, workdir: Path) -> dict[str, list[float]]:
    """One bash call (a typical read-only command) uncontained, and in the sandbox as an
    unapproved and an approved call; and the risk judge's decision on that command."""
    (workdir / "notes.txt").write_text("bench\n")
    args = BashArgs(command=BASH_COMMAND)
    samples: dict[str, list[float]] = {}
    kinds = [("uncontained", Sandbox(SandboxMode.OFF), Access.READ_ONLY)]
    with contextlib.suppress(SandboxUnavailable):
        contained = probe(SandboxMode.BWRAP)
        kinds += [("bwrap, read-only", contained, Access.READ_ONLY)]
        kinds += [("bwrap, approved", contained, Access.APPROVED)]
    for label, sandbox, access in kinds:
        tool = BashTool(sandbox=sandbox)
        ctx = ToolContext(session="bench", workdir=workdir, access=access)
        await _time_each(max(5, calls // 10), lambda: tool.run(args, ctx))  # noqa: B023
        samples[label] = await _time_each(calls, lambda: tool.run(args, ctx))  # noqa: B023
    policy, arguments = RiskPolicy(), {"command": BASH_COMMAND}

    async def judge() -> None:
        policy.assess("bash", arguments, workdir)

    samples["judge"] = await _time_each(calls * 10, judge)
    return samples


def _line(label: str, samples: list[float]) -> str:
    return (
        f"{label:<44} p50 {percentile(samples, 0.5):9.1f} us   "
        f"p99 {percentile(samples, 0.99):9.1f} us"
    )


def _print_bash(samples: dict[str, list[float]]) -> None:
    print(_line("risk judge, one bash command", samples.pop("judge")))
    for label, values in samples.items():
        print(_line(f"bash call, {label}", values))
    if "bwrap, read-only" not in samples:
        print("bash sandbox: bwrap unavailable here, no contained figures")
        return
    bare, boxed = (
        percentile(samples["uncontained"], 0.5),
        percentile(samples["bwrap, read-only"], 0.5),
    )
    print(f"sandbox cost per bash call: p50 {boxed - bare:.0f} us, ratio {boxed / bare:.2f}x")


async def run_bench(
    settings: Settings, target: str, calls: int, turns: int, bash_calls: int = 200
) -> int:
    store = f"redis {settings.redis_url}" if settings.redis_url else "embedded store"
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if target == "runtime":
            r = await bench_tool_calls(calls, settings, workdir)
            print(_line("tool call, direct", r["direct"]))
            print(_line("tool call, executor + middleware chain", r["chain"]))
            direct, chained = percentile(r["direct"], 0.5), percentile(r["chain"], 0.5)
            print(
                f"chain overhead per call: p50 {chained - direct:.1f} us, "
                f"ratio {chained / direct:.1f}x   (target: overhead p50 <= 100 us)"
            )
            rate, samples = await bench_turns(turns, settings, workdir)
            print(_line(f"demo-model turn ({store})", samples))
            print(f"turns per second: {rate:.0f}")
            _print_bash(await bench_bash_calls(bash_calls, workdir))
            return 0
        trips = await bench_approval_round_trips(turns, settings, workdir)
        print(_line(f"approval round trip ({store})", trips))
        print("  (suspend -> approve -> resume -> final answer; target p99 <= 10000 us)")
        small = await bench_checkpoint_writes(turns, 10, settings, workdir)
        large = await bench_checkpoint_writes(turns, 10_000, settings, workdir)
        print(_line("checkpoint write, 10 prior messages", small))
        print(_line("checkpoint write, 10,000 prior messages", large))
        ratio = percentile(large, 0.5) / percentile(small, 0.5)
        print(f"checkpoint write ratio 10,000 / 10 (p50): {ratio:.2f}   (target <= 1.5)")
    return 0
