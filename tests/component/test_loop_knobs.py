"""The loop's knobs: a run whose calls keep getting the same outcome stops (`repeated_calls`)
unless its tool is a polling one; read-only calls run side by side at most N at once, or one
at a time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.settings import Settings
from bot.wiring import loop_options
from runtime.channel import Reply, RunFinished
from runtime.executor import DEFAULT_MAX_PARALLEL, ToolExecutor
from runtime.loop import LoopOptions
from runtime.models import RunResult, StopReason, ToolCall, ToolMessage
from runtime.repeats import RepeatRule
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from runtime.tools.files import ReadTool
from runtime.tools.registry import ToolRegistry
from tests.component.test_retake import Scripted, asks, says
from tests.support import ALICE, HERE, RecordingChannel, make_runtime


class StatusArgs(ToolArgs):
    job: str = "build"


class StatusTool(Tool[StatusArgs]):
    """Asked again and again while waiting: the same answer each time is its normal use."""

    name = "status"
    description = "The status of a job."
    args_model = StatusArgs
    polling = True

    async def run(self, args: StatusArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("pending")


class EchoTool(StatusTool):
    """Not marked polling: CLAWGATE_POLLING_TOOLS names it."""

    name = "echo"
    polling = False


class ProbeArgs(ToolArgs):
    n: int


class ProbeTool(Tool[ProbeArgs]):
    """A read-only tool that records when each call starts and how many run at once."""

    name = "probe"
    description = "Probe."
    args_model = ProbeArgs
    parallel_safe = True

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.started: list[int] = []

    async def run(self, args: ProbeArgs, ctx: ToolContext) -> ToolOutput:
        self.started.append(args.n)
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(0.02)
        self.running -= 1
        return ToolOutput(f"probe {args.n}")


def read(call_id: str, path: str) -> tuple[str, str, str]:
    return call_id, "read", json.dumps({"path": path})


async def run(
    redis: aioredis.Redis,
    workdir: Path,
    model: Scripted,
    tools: list[Tool[Any]] | None = None,
    options: LoopOptions | None = None,
) -> tuple[RunResult, RecordingChannel]:
    default: list[Tool[Any]] = [ReadTool(), StatusTool(), EchoTool()]
    registry = ToolRegistry(tools or default)
    runtime, channel = make_runtime(
        redis, workdir, model, max_steps=10, registry=registry, middlewares=[], loop=options
    )
    return await runtime.run("k1", "go", ALICE, HERE), channel


async def test_the_same_failing_call_stops_the_run_at_the_limit(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Scripted(*[asks(read(f"c{i}", "secret-plan.txt")) for i in range(10)])

    result, channel = await run(redis, workdir, model)

    assert result.stop_reason is StopReason.REPEATED_CALLS
    assert result.steps == 3 and model.asked == 3
    said = channel.of(Reply)[-1].text
    assert "read 3 times in a row" in said and "the same error" in said
    assert "secret-plan" not in said  # the tool and the count, never the arguments
    assert channel.of(RunFinished)[-1].stop_reason is StopReason.REPEATED_CALLS


async def test_a_successful_identical_repeat_is_a_loop_too(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "a.txt").write_text("same every time")
    model = Scripted(*[asks(read(f"c{i}", "a.txt")) for i in range(10)])

    result, channel = await run(redis, workdir, model, options=LoopOptions(RepeatRule(limit=4)))

    assert result.stop_reason is StopReason.REPEATED_CALLS and result.steps == 4
    assert "read 4 times in a row" in channel.of(Reply)[-1].text
    assert "the same result" in channel.of(Reply)[-1].text


async def test_another_call_in_between_starts_the_count_over(
    redis: aioredis.Redis, workdir: Path
) -> None:
    a, b = read("a", "a.txt"), read("b", "b.txt")
    model = Scripted(asks(a), asks(a), asks(b), asks(a), asks(a), says("gave up"))

    result, _ = await run(redis, workdir, model)

    assert result.stop_reason is StopReason.FINAL and result.final_text == "gave up"


async def test_polling_tools_and_a_limit_of_zero_are_never_stopped(
    redis: aioredis.Redis, workdir: Path
) -> None:
    polls = [asks((f"s{i}", "status", "{}")) for i in range(6)]
    result, _ = await run(redis, workdir, Scripted(*polls, says("built")))
    assert result.stop_reason is StopReason.FINAL and result.steps == 7

    echoes = [asks((f"e{i}", "echo", "{}")) for i in range(6)]
    named = LoopOptions(RepeatRule(polling=frozenset({"echo"})))
    result, _ = await run(redis, workdir, Scripted(*echoes, says("ok")), options=named)
    assert result.stop_reason is StopReason.FINAL

    # Not named: the same calls stop.
    echoes = [asks((f"f{i}", "echo", "{}")) for i in range(6)]
    result, _ = await run(redis, workdir, Scripted(*echoes, says("ok")))
    assert result.stop_reason is StopReason.REPEATED_CALLS

    failing = [asks(read(f"m{i}", "missing.txt")) for i in range(6)]
    off = LoopOptions(RepeatRule(limit=0))
    result, _ = await run(redis, workdir, Scripted(*failing, says("no file")), options=off)
    assert result.stop_reason is StopReason.FINAL


def probes(count: int) -> list[ToolCall]:
    return [
        ToolCall(id=f"p{i}", name="probe", arguments=json.dumps({"n": i})) for i in range(count)
    ]


@pytest.mark.parametrize("most", [1, 2, DEFAULT_MAX_PARALLEL])
async def test_read_only_calls_run_at_most_n_at_once(workdir: Path, most: int) -> None:
    probe = ProbeTool()
    executor = ToolExecutor(ToolRegistry([probe]), max_parallel=most)

    out = await executor.execute(probes(6), ToolContext(session="s", workdir=workdir))

    assert [r.model_text for r in out.results] == [f"probe {i}" for i in range(6)]
    assert probe.peak == min(most, 6)
    assert probe.started == list(range(6))  # started in the model's order


async def test_with_parallel_off_a_run_reads_one_at_a_time(
    redis: aioredis.Redis, workdir: Path
) -> None:
    probe = ProbeTool()
    model = Scripted(asks(*[(c.id, c.name, c.arguments) for c in probes(4)]), says("done"))
    one = LoopOptions(max_parallel=1)

    result, _ = await run(redis, workdir, model, tools=[probe], options=one)

    assert result.stop_reason is StopReason.FINAL and probe.peak == 1
    assert probe.started == [0, 1, 2, 3]


def test_the_settings_reach_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REPEAT_LIMIT", "POLLING_TOOLS", "PARALLEL_TOOLS", "MAX_PARALLEL_TOOLS"):
        monkeypatch.delenv(f"CLAWGATE_{name}", raising=False)
    defaults = loop_options(Settings())
    assert defaults.repeats == RepeatRule(3, frozenset())
    assert defaults.max_parallel == DEFAULT_MAX_PARALLEL
    monkeypatch.setenv("CLAWGATE_REPEAT_LIMIT", "0")
    monkeypatch.setenv("CLAWGATE_POLLING_TOOLS", "ci.status, deploy.wait")
    monkeypatch.setenv("CLAWGATE_MAX_PARALLEL_TOOLS", "2")
    options = loop_options(Settings())
    assert options.repeats == RepeatRule(0, frozenset({"ci.status", "deploy.wait"}))
    assert options.max_parallel == 2
    monkeypatch.setenv("CLAWGATE_PARALLEL_TOOLS", "false")
    assert loop_options(Settings()).max_parallel == 1


async def test_history_keeps_each_repeated_result(redis: aioredis.Redis, workdir: Path) -> None:
    model = Scripted(*[asks(read(f"c{i}", "missing.txt")) for i in range(10)])
    registry = ToolRegistry([ReadTool()])
    runtime, _ = make_runtime(redis, workdir, model, registry=registry, middlewares=[])

    await runtime.run("k2", "go", ALICE, HERE)

    stored = await runtime.history.load("k2")
    assert sum(isinstance(m, ToolMessage) for m in stored) == 3  # every call answered
