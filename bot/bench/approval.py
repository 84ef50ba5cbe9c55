"""`clawgate bench approval`: suspending and resuming a run in sessions that already hold N
messages, for each N of `--history`.

Each N gets a prototype session: N messages of ordinary turns (a request, a bash call, its
output, an answer: about 240 bytes each as stored), then one whole round (ask, approve, answer)
as the thread's previous turn, which compacts it when it is over the context budget as a real
thread would have been. Each timed round then runs in a fresh copy of it (COPY on the server,
untimed), so every round sees the same N, and is removed after; the lengths take turns:

- ask: a message in, the model's gated call, suspended: what `runtime.run` takes;
- suspend: the suspension step inside it (the approval record, the checkpoint and the turn's
  history written by one script, the notice), with the bytes the client sent Redis for it;
- resume: the decision, the approved call run exactly once, the run on to its final answer:
  what `runtime.decide` takes.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.bench.runtime import ACTOR, CONVERSATION, bench_runtime, percentile
from bot.bench.wire import WireCounter
from bot.settings import Settings
from runtime.agent import Runtime
from runtime.loop import RunState, Suspension
from runtime.models import (
    AssistantMessage,
    Message,
    RunResult,
    StopReason,
    ToolCall,
    ToolMessage,
    ToolStatus,
    UserMessage,
)
from runtime.store.connection import is_cluster

DEFAULT_HISTORY = [10, 100, 1_000, 10_000]
ASK = "call noop {}"
FILL_CHUNK = 1_000


def turn(i: int) -> list[Message]:
    """One ordinary turn of a thread: four messages, about 240 bytes each as stored."""
    call = ToolCall(
        id=f"call_{i:08d}",
        name="bash",
        arguments=f'{{"command": "pytest tests/unit/test_module_{i}.py -q --no-header"}}',
    )
    output = (
        f"{'=' * 29} test session starts {'=' * 30}\n"
        f"platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0\nrootdir: /srv/app\n"
        f"collected 20 items\n\ntests/unit/test_module_{i}.py {'.' * 20}{' ' * 20}[100%]\n\n"
        f"{'=' * 30} 20 passed in 0.{i % 97:02d}s {'=' * 30}"
    )
    return [
        UserMessage(
            content=f"please run the unit tests of module {i} and tell me what fails",
            actor="slack:U0123456789",
        ),
        AssistantMessage(content="Running them now.", tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name="bash", content=output, status=ToolStatus.COMPLETED),
        AssistantMessage(
            content=f"All 20 tests of module {i} passed in 0.{i % 97:02d} s; nothing fails. "
            "The slowest test took under a tenth of a second; no warnings were printed."
        ),
    ]


def filler(count: int) -> list[Message]:
    messages = [m for i in range(count // 4 + 1) for m in turn(i)]
    return messages[:count]


def _session_keys(runtime: Runtime, session: str) -> list[str]:
    k = runtime.history.keys
    names = ["history", "summary", "summaries", "run", "jobs", "pending", "held", "audit"]
    return [k.session(session, name) for name in names]


async def remove_session(runtime: Runtime, session: str, approval_id: str | None) -> None:
    keys = _session_keys(runtime, session)
    if approval_id:
        keys.append(runtime.history.keys.approval(session, approval_id))
    await runtime.history.redis.unlink(*keys)


async def copy_session(runtime: Runtime, proto: str, session: str, summary: bool) -> None:
    """A fresh copy of the prototype session's history (and summary), untimed: a server-side
    COPY, or on a cluster, where the copy's keys hash to another slot, DUMP and RESTORE."""
    redis, keys = runtime.history.redis, runtime.history.keys
    pairs = [(keys.history(proto), keys.history(session))]
    if summary:
        pairs.append((keys.summary(proto), keys.summary(session)))
    for source, target in pairs:
        if not is_cluster(redis):
            await redis.copy(source, target)
        elif (dumped := await redis.dump(source)) is not None:
            await redis.restore(target, 0, dumped)


async def _round(runtime: Runtime, session: str) -> tuple[float, float, str]:
    """(ask, resume) in ms and the approval's id, for one round in `session`."""
    t0 = time.perf_counter_ns()
    asked = await runtime.run(session, ASK, ACTOR, CONVERSATION)
    t1 = time.perf_counter_ns()
    if asked.approval_id is None:
        raise RuntimeError(f"bench round did not suspend: {asked}")
    decision = await runtime.decide(asked.approval_id, True, ACTOR, CONVERSATION)
    t2 = time.perf_counter_ns()
    if decision.run is None or decision.run.stop_reason is not StopReason.FINAL:
        raise RuntimeError(f"bench round ended with {decision}")
    return (t1 - t0) / 1e6, (t2 - t1) / 1e6, asked.approval_id


def _timed_suspension(
    runtime: Runtime, counter: WireCounter, times: list[float], sizes: list[int]
) -> Callable[[], None]:
    """Time each suspension step (and count its bytes); returns the undo."""
    suspender = runtime.suspender
    original = suspender.suspend

    async def suspend(state: RunState, suspension: Suspension, result: RunResult) -> RunResult:
        sent, t0 = counter.sent, time.perf_counter_ns()
        done = await original(state, suspension, result)
        times.append((time.perf_counter_ns() - t0) / 1e6)
        sizes.append(counter.sent - sent)
        return done

    suspender.suspend = suspend  # type: ignore[method-assign]

    def undo() -> None:
        suspender.suspend = original  # type: ignore[method-assign]

    return undo


def latency_figures(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(samples, 0.5), 3),
        "p99_ms": round(percentile(samples, 0.99), 3),
    }


@dataclass
class Thread:
    """One history length's prototype session and what its rounds measured."""

    prior: int
    proto: str
    approval: str  # the previous turn's, removed with the prototype
    length: int = 0
    upto: int = 0  # where its summary ends (0: none)
    summary: str | None = None
    asks: list[float] = field(default_factory=list)
    suspends: list[float] = field(default_factory=list)
    resumes: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    def discard(self) -> None:
        """Forget what the rounds so far measured (the warm-up's)."""
        self.asks, self.resumes, self.suspends, self.sizes = [], [], [], []

    def figures(self, counted: bool) -> dict[str, Any]:
        sizes = sorted(self.sizes)
        return {
            "messages": self.length,
            "window": self.length - self.upto,  # what a run reads: the messages after it
            "summary": self.summary is not None,
            "ask": latency_figures(self.asks),
            "suspend": latency_figures(self.suspends),
            "resume": latency_figures(self.resumes),
            "round": latency_figures([a + r for a, r in zip(self.asks, self.resumes, strict=True)]),
            "bytes_per_suspension": sizes[len(sizes) // 2] if counted and sizes else None,
        }


async def prepare(runtime: Runtime, prior: int) -> Thread:
    """A prototype session of `prior` messages, then one whole round as the thread's previous
    turn (which compacts it when it is over the budget, as a real thread's would be)."""
    redis, keys = runtime.history.redis, runtime.history.keys
    proto = f"bench:h{prior}"
    messages = filler(prior)
    for start in range(0, len(messages), FILL_CHUNK):
        await runtime.history.append(proto, *messages[start : start + FILL_CHUNK])
    _, _, approval = await _round(runtime, proto)
    thread = Thread(prior, proto, approval, length=await runtime.history.length(proto))
    summary = await redis.hget(keys.summary(proto), "record")
    thread.summary = None if summary is None else str(summary)
    thread.upto = int(await redis.hget(keys.summary(proto), "upto") or 0)
    return thread


async def measure(runtime: Runtime, counter: WireCounter, thread: Thread, i: int) -> None:
    """One round in a fresh copy of the thread's prototype, removed after."""
    session = f"{thread.proto}:{i}"
    await copy_session(runtime, thread.proto, session, thread.summary is not None)
    suspends: list[float] = []
    sizes: list[int] = []
    undo = _timed_suspension(runtime, counter, suspends, sizes)
    try:
        ask, resume, approval_id = await _round(runtime, session)
    finally:
        undo()
    thread.asks.append(ask)
    thread.resumes.append(resume)
    thread.suspends += suspends
    thread.sizes += sizes
    await remove_session(runtime, session, approval_id)


def warm_rounds(rounds: int) -> int:
    """Rounds that warm up before `rounds` timed ones, untimed."""
    return max(3, rounds // 10)


async def run_approval_bench(
    settings: Settings,
    workdir: Path,
    rounds: int,
    history: list[int],
    beside: Callable[[int, int], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """Figures of `clawgate bench approval`, by history length. The lengths take turns round
    by round, so a slower moment of a shared machine weighs on all of them alike. `beside`
    (prior messages, round) runs after each of clawgate's rounds, warm-up included: where
    `--peers` times the same round of the other systems (bot/bench/peers.py)."""
    figures: dict[str, Any] = {
        "store": "redis" if settings.redis_url else "embedded",
        "context_budget": settings.context_budget,
        "rounds": rounds,
        "history": {},
    }
    async with bench_runtime(settings, workdir, gated=True) as runtime:
        counter = WireCounter()
        counted = await counter.install(runtime.history.redis)
        threads = [await prepare(runtime, prior) for prior in history]
        gc.collect()
        gc.freeze()  # as `clawgate serve` does after start-up
        try:
            warm = warm_rounds(rounds)
            for i in range(warm + rounds):
                for thread in threads:
                    await measure(runtime, counter, thread, i)
                    if beside is not None:
                        await beside(thread.prior, i)
                    if i < warm:
                        thread.discard()
            for thread in threads:
                figures["history"][str(thread.prior)] = thread.figures(counted)
        finally:
            gc.unfreeze()
            for thread in threads:
                await remove_session(runtime, thread.proto, thread.approval)
    return figures


def approval_lines(figures: dict[str, Any]) -> list[str]:
    lines = [
        f"approval: suspend and resume by prior messages ({figures['store']}, "
        f"context budget {figures['context_budget']} characters, {figures['rounds']} rounds each)"
    ]
    header = (
        f"{'prior':>7} {'window':>7}  {'ask p50/p99 ms':>16}  {'suspend p50/p99 ms':>19}  "
        f"{'resume p50/p99 ms':>18}  {'bytes/suspension':>16}"
    )
    lines.append(header)
    for prior, row in figures["history"].items():
        ask, suspend, resume = row["ask"], row["suspend"], row["resume"]
        size = row["bytes_per_suspension"]
        lines.append(
            f"{prior:>7} {row['window']:>7}  "
            f"{ask['p50_ms']:>7.2f} /{ask['p99_ms']:>7.2f}  "
            f"{suspend['p50_ms']:>8.2f} /{suspend['p99_ms']:>8.2f}  "
            f"{resume['p50_ms']:>8.2f} /{resume['p99_ms']:>7.2f}  "
            f"{'n/a' if size is None else size:>16}"
        )
    rows = list(figures["history"].values())
    if len(rows) > 1:
        first, last = rows[0]["resume"]["p50_ms"], rows[-1]["resume"]["p50_ms"]
        names = list(figures["history"])
        lines.append(
            f"resume p50 ratio {names[-1]} / {names[0]} prior messages: {last / first:.2f}   "
            "(target <= 1.5)"
        )
    return lines
