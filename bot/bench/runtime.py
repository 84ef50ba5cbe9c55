"""`clawgate bench runtime|approval`.

runtime: what the executor and middleware chain cost per tool call against calling the tool
directly, demo-model turns per second, and a bash call in the bwrap sandbox against the same
call uncontained (plus the judge's cost for a typical command), and an audit entry appended
chained against plain (bot/bench/audit_chain.py). approval (bot/bench/approval.py):
suspend and resume at each history length. With `--json`, one JSON document of the figures."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bot.settings import Settings, SettingsError
from bot.wiring import build_tracer
from runtime.agent import Runtime
from runtime.approval.store import ApprovalStore
from runtime.channel import Event
from runtime.executor import ToolExecutor
from runtime.middleware.default import default_chain
from runtime.models import (
    Actor,
    ConversationRef,
    StopReason,
    ToolCall,
)
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyService
from runtime.providers.base import Provider
from runtime.providers.demo import DemoProvider
from runtime.risk.policy import RiskPolicy
from runtime.runtime_config import RuntimeConfig
from runtime.store.connection import connect
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from runtime.tools.bash import BashArgs, BashTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Access, Sandbox, SandboxMode, SandboxUnavailable, probe


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
async def bench_runtime(
    settings: Settings, workdir: Path, gated: bool, provider: Provider | None = None
) -> AsyncIterator[Runtime]:
    """A runtime on `provider` (the demo model by default) under a throwaway key prefix,
    removed afterwards."""
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    keys = Keys(f"{settings.redis_prefix}-bench-{time.time_ns()}")
    try:
        approvals = ApprovalStore(redis, keys)
        policies = _policies(redis, keys, gated)
        history = HistoryStore(redis, keys)
        config = RuntimeConfig(workdir=workdir, context_budget=settings.context_budget)
        # As `clawgate serve` runs: audit trail on, tracing in the configured mode (and
        # exported to OpenTelemetry when the OTEL_* variables say so).
        tracer = build_tracer(settings, redis, keys)
        yield Runtime(
            config,
            provider or DemoProvider(),
            ToolRegistry([NoopTool()]),
            history,
            NullChannel(),
            approvals,
            policies,
            tracer=tracer,
        )
    finally:
        # Under the prefix, and in the audit chain's own hash slot: "{<prefix>:audit}:head"...
        patterns = (f"{keys.prefix}:*", f"{{{keys.prefix}:*")
        stale = [k for p in patterns async for k in redis.scan_iter(match=p)]
        if stale:
            await redis.delete(*stale)
        await redis.aclose()


async def bench_tool_calls(calls: int, settings: Settings, workdir: Path) -> dict[str, list[float]]:
    """The chain as a model step runs it: the step's policy is already on the context."""
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
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
    async with bench_runtime(settings, workdir, gated=False) as runtime:
        samples = []
        started = time.perf_counter()
        for i in range(turns):
            t0 = time.perf_counter_ns()
            result = await runtime.run(f"bench:{i % 50}", "call noop {}", ACTOR, CONVERSATION)
            samples.append((time.perf_counter_ns() - t0) / 1000)
            if result.stop_reason is not StopReason.FINAL:
                raise RuntimeError(f"bench turn ended with {result.stop_reason}")
        return turns / (time.perf_counter() - started), samples


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


def _figures(samples: list[float]) -> dict[str, float]:
    return {
        "p50_us": round(percentile(samples, 0.5), 1),
        "p99_us": round(percentile(samples, 0.99), 1),
    }


def _line(label: str, samples: list[float]) -> str:
    return _shown(label, _figures(samples))


def _shown(label: str, figures: dict[str, float]) -> str:
    return f"{label:<44} p50 {figures['p50_us']:9.1f} us   p99 {figures['p99_us']:9.1f} us"


async def runtime_figures(
    settings: Settings, workdir: Path, calls: int, turns: int, bash_calls: int
) -> dict[str, Any]:
    """Figures of `clawgate bench runtime` (times in microseconds)."""
    from bot.bench.audit_chain import bench_audit_append  # noqa: PLC0415 - it imports this module

    r = await bench_tool_calls(calls, settings, workdir)
    direct, chained = percentile(r["direct"], 0.5), percentile(r["chain"], 0.5)
    rate, samples = await bench_turns(turns, settings, workdir)
    bash = await bench_bash_calls(bash_calls, workdir)
    figures: dict[str, Any] = {
        "store": "redis" if settings.redis_url else "embedded",
        "tool_call": {
            "direct": _figures(r["direct"]),
            "chain": _figures(r["chain"]),
            "overhead_p50_us": round(chained - direct, 1),
            "ratio": round(chained / direct, 2),
        },
        "turn": {**_figures(samples), "per_second": round(rate)},
        "judge": _figures(bash.pop("judge")),
        "audit_entry": await bench_audit_append(settings, max(200, calls // 10)),
        "bash": {label: _figures(values) for label, values in bash.items()},
    }
    if "bwrap, read-only" in bash:
        bare = percentile(bash["uncontained"], 0.5)
        boxed = percentile(bash["bwrap, read-only"], 0.5)
        figures["sandbox_cost"] = {"p50_us": round(boxed - bare), "ratio": round(boxed / bare, 2)}
    return figures


def runtime_lines(figures: dict[str, Any]) -> list[str]:
    calls, turn = figures["tool_call"], figures["turn"]
    store = "redis" if figures["store"] == "redis" else "embedded store"
    lines = [
        _shown("tool call, direct", calls["direct"]),
        _shown("tool call, executor + middleware chain", calls["chain"]),
        f"chain overhead per call: p50 {calls['overhead_p50_us']:.1f} us, "
        f"ratio {calls['ratio']:.1f}x   (target: overhead p50 <= 100 us)",
        _shown(f"demo-model turn ({store})", turn),
        f"turns per second: {turn['per_second']}",
        _shown("risk judge, one bash command", figures["judge"]),
    ]
    from bot.bench.audit_chain import audit_lines  # noqa: PLC0415 - it imports this module

    lines += audit_lines(figures["audit_entry"])
    lines += [_shown(f"bash call, {label}", values) for label, values in figures["bash"].items()]
    cost = figures.get("sandbox_cost")
    if cost is None:
        lines.append("bash sandbox: bwrap unavailable here, no contained figures")
    else:
        lines.append(
            f"sandbox cost per bash call: p50 {cost['p50_us']:.0f} us, ratio {cost['ratio']:.2f}x"
        )
    return lines


async def run_bench(
    settings: Settings,
    target: str,
    calls: int,
    turns: int,
    bash_calls: int = 200,
    history: list[int] | None = None,
    as_json: bool = False,
    model_server: bool = False,
    peers: bool = False,
) -> int:
    """`clawgate bench runtime|approval`: the figures as lines, or one JSON document.
    `model_server`: runtime turns on the real model path instead (bot/bench/model_path.py);
    `peers`: approval beside the OpenAI Agents SDK and LangGraph (bot/bench/peers.py)."""
    if model_server and target != "runtime":
        raise SettingsError("--model-server: only for `clawgate bench runtime`")
    if peers and target != "approval":
        raise SettingsError("--peers: only for `clawgate bench approval`")
    from bot.bench.approval import (  # noqa: PLC0415 - it imports this module
        DEFAULT_HISTORY,
        approval_lines,
        run_approval_bench,
    )

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if model_server:
            from bot.bench.model_path import (  # noqa: PLC0415 - it imports this module
                DEFAULT_HISTORY as MODEL_HISTORY,
            )
            from bot.bench.model_path import model_path_lines, run_model_path_bench  # noqa: PLC0415

            figures = await run_model_path_bench(settings, workdir, turns, history or MODEL_HISTORY)
            lines = model_path_lines(figures)
        elif target == "runtime":
            figures = await runtime_figures(settings, workdir, calls, turns, bash_calls)
            lines = runtime_lines(figures)
        elif peers:
            from bot.bench.peers import peers_lines, run_peers_bench  # noqa: PLC0415

            figures = await run_peers_bench(settings, workdir, turns, history or DEFAULT_HISTORY)
            lines = peers_lines(figures)
        else:
            figures = await run_approval_bench(settings, workdir, turns, history or DEFAULT_HISTORY)
            lines = approval_lines(figures)
    print(json.dumps(figures, indent=2) if as_json else "\n".join(lines))
    return 0
