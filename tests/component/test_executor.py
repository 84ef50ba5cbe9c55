"""The executor's per-call lifecycle: resolve, validate, strip markers, dedupe, chain, schedule."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runtime.channel import Event, ToolFinished, ToolStarted
from runtime.executor import NO_OUTPUT, ToolExecutor
from runtime.middleware.chain import Handler, ToolInvocation
from runtime.middleware.tool_policy import ToolPolicyMiddleware
from runtime.models import ToolCall, ToolResult, ToolStatus
from runtime.policy.model import PolicyDocument, ToolRules
from runtime.policy.resolve import Defaults, resolve
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from runtime.tools.bash import BashTool
from runtime.tools.files import EditTool, ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry


class EchoArgs(ToolArgs):
    text: str = ""


class EchoTool(Tool[EchoArgs]):
    """Records every run; returns its text."""

    name = "echo"
    description = "Echo text."
    args_model = EchoArgs

    def __init__(self) -> None:
        self.runs: list[EchoArgs] = []

    async def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
        self.runs.append(args)
        return ToolOutput(args.text)


def call(name: str, args: dict[str, Any] | str, call_id: str = "c1") -> ToolCall:
    return ToolCall(
        id=call_id, name=name, arguments=args if isinstance(args, str) else json.dumps(args)
    )


def ctx(workdir: Path) -> ToolContext:
    return ToolContext(session="s1", workdir=workdir)


def file_registry(**kwargs: Any) -> ToolRegistry:
    return ToolRegistry([ReadTool(), WriteTool(), EditTool(), BashTool(timeout=10)], **kwargs)


async def test_unknown_tool_is_an_error_observation(workdir: Path) -> None:
    out = await ToolExecutor(file_registry()).execute([call("rm_rf", {})], ctx(workdir))
    (result,) = out.results
    assert result.status is ToolStatus.ERROR
    assert "unknown tool 'rm_rf'" in result.model_text
    assert "read" in result.model_text  # tells the model what it can use


async def test_known_but_disabled_tool_is_refused_and_not_run(workdir: Path) -> None:
    registry = file_registry(enabled=["read"])
    out = await ToolExecutor(registry).execute(
        [call("write", {"path": "a.txt", "content": "x"})], ctx(workdir)
    )
    assert out.results[0].status is ToolStatus.DENIED
    assert "not enabled" in out.results[0].model_text
    assert not (workdir / "a.txt").exists()
    assert [s.name for s in registry.specs()] == ["read"]


async def test_invalid_arguments_cause_no_side_effect(workdir: Path) -> None:
    executor = ToolExecutor(file_registry())
    out = await executor.execute(
        [
            call("write", {"path": "a.txt"}, "c1"),  # content missing
            call("write", {"path": "b.txt", "content": "x", "mode": "append"}, "c2"),  # extra
            call("write", '{"path": "c.txt", "content": ', "c3"),  # broken JSON
            call("write", "[1, 2]", "c4"),  # not an object
        ],
        ctx(workdir),
    )
    statuses = [r.status for r in out.results]
    assert statuses == [ToolStatus.ERROR] * 4
    assert "content: Field required" in out.results[0].model_text
    assert "mode: Extra inputs are not permitted" in out.results[1].model_text
    assert "not valid JSON" in out.results[2].model_text
    assert "must be a JSON object" in out.results[3].model_text
    assert list(workdir.iterdir()) == []


async def test_runtime_markers_are_stripped_from_model_arguments(workdir: Path) -> None:
    echo = EchoTool()
    seen: list[dict[str, Any]] = []

    async def spy(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        seen.append(invocation.args.model_dump())
        return await call_next(invocation)

    registry = ToolRegistry([echo])
    out = await ToolExecutor(registry, middlewares=[spy]).execute(
        [call("echo", {"text": "hi", "approved": True, "approval_id": "x", "_internal": 1})],
        ctx(workdir),
    )
    assert out.results[0].status is ToolStatus.COMPLETED
    assert seen == [{"text": "hi"}]


async def test_identical_calls_in_one_batch_run_once(workdir: Path) -> None:
    echo = EchoTool()
    out = await ToolExecutor(ToolRegistry([echo])).execute(
        [
            call("echo", {"text": "a"}, "c1"),
            call("echo", '{"text":"a"}', "c2"),  # same arguments, different spelling
            call("echo", {"text": "b"}, "c3"),
        ],
        ctx(workdir),
    )
    assert [a.text for a in echo.runs] == ["a", "b"]
    assert [r.call_id for r in out.results] == ["c1", "c2", "c3"]
    assert "identical to call c1" in out.results[1].model_text
    assert out.results[1].model_text.endswith("a")


async def test_middleware_runs_in_registration_order_and_unwinds_in_reverse(workdir: Path) -> None:
    trail: list[str] = []

    def recorder(name: str) -> Any:
        async def middleware(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
            trail.append(f"{name} in")
            result = await call_next(invocation)
            trail.append(f"{name} out")
            return result

        return middleware

    echo = EchoTool()
    registry = ToolRegistry([echo])
    await ToolExecutor(registry, middlewares=[recorder("A"), recorder("B")]).execute(
        [call("echo", {"text": "x"})], ctx(workdir)
    )
    assert trail == ["A in", "B in", "B out", "A out"]
    assert len(echo.runs) == 1


async def test_middleware_can_short_circuit(workdir: Path) -> None:
    trail: list[str] = []

    async def gate(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        trail.append("gate")
        return ToolResult(
            call_id=invocation.call.id,
            tool=invocation.tool.name,
            status=ToolStatus.DENIED,
            model_text="blocked by gate",
            display="blocked",
        )

    async def later(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        trail.append("later")
        return await call_next(invocation)

    echo = EchoTool()
    registry = ToolRegistry([echo])
    out = await ToolExecutor(registry, middlewares=[gate, later]).execute(
        [call("echo", {"text": "x"})], ctx(workdir)
    )
    assert out.results[0].model_text == "blocked by gate"
    assert trail == ["gate"]
    assert echo.runs == []


async def test_policy_deny_wins_over_allow(workdir: Path) -> None:
    """Enforced at execution time with the step's policy on the context, whatever the model
    was offered."""
    registry = file_registry()
    executor = ToolExecutor(registry, middlewares=[ToolPolicyMiddleware()])
    context = ctx(workdir)
    document = PolicyDocument(tools=ToolRules(allow=["read", "write"], deny=["write"]))
    tools = [t.name for t in registry.active()]
    context.policy = resolve(document, {}, "console:x", Defaults(enabled=tuple(tools)), tools)
    out = await executor.execute(
        [
            call("write", {"path": "a.txt", "content": "x"}, "c1"),
            call("bash", {"command": "touch b.txt"}, "c2"),  # not in allow list
            call("read", {"path": "missing.txt"}, "c3"),  # allowed: runs (and fails)
        ],
        context,
    )
    assert [r.status for r in out.results] == [
        ToolStatus.DENIED,
        ToolStatus.DENIED,
        ToolStatus.ERROR,
    ]
    assert "denied here by policy: policy file [global]" in out.results[0].model_text
    assert "not in the allow list of policy file [global]" in out.results[1].model_text
    assert "no such file" in out.results[2].model_text
    assert list(workdir.iterdir()) == []


async def test_tool_is_resolved_again_at_execution_time(workdir: Path) -> None:
    registry = file_registry()

    async def disable_write(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        registry.excluded = frozenset({"write"})  # e.g. an admin changed policy meanwhile
        return await call_next(invocation)

    out = await ToolExecutor(registry, middlewares=[disable_write]).execute(
        [call("write", {"path": "a.txt", "content": "x"})], ctx(workdir)
    )
    assert out.results[0].status is ToolStatus.DENIED
    assert "no longer enabled" in out.results[0].model_text
    assert not (workdir / "a.txt").exists()


async def test_empty_output_and_output_cap(workdir: Path) -> None:
    echo = EchoTool()
    executor = ToolExecutor(ToolRegistry([echo]), max_result_chars=300)
    out = await executor.execute(
        [call("echo", {"text": ""}, "c1"), call("echo", {"text": "x" * 1000}, "c2")], ctx(workdir)
    )
    empty, long = out.results
    assert empty.model_text == NO_OUTPUT
    assert long.model_text.startswith("x" * 300)
    assert "cut at 300 of 1000 characters" in long.model_text
    assert long.artifact == "x" * 1000
    assert len(long.display) < 200


async def test_consecutive_reads_run_concurrently_and_keep_model_order(workdir: Path) -> None:
    for name in ("a", "b", "c"):
        (workdir / f"{name}.txt").write_text(f"content {name}")
    # Each read waits at the barrier inside the chain: only concurrent calls get through.
    barrier = asyncio.Barrier(3)
    finished: list[str] = []

    async def rendezvous(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        await asyncio.wait_for(barrier.wait(), timeout=5)
        result = await call_next(invocation)
        finished.append(invocation.call.id)
        return result

    registry = file_registry()
    out = await ToolExecutor(registry, middlewares=[rendezvous]).execute(
        [call("read", {"path": f"{n}.txt"}, f"c{n}") for n in ("c", "a", "b")], ctx(workdir)
    )
    assert [r.status for r in out.results] == [ToolStatus.COMPLETED] * 3
    assert [r.call_id for r in out.results] == ["cc", "ca", "cb"]
    assert [r.model_text for r in out.results] == ["content c", "content a", "content b"]
    assert sorted(finished) == ["ca", "cb", "cc"]


async def test_side_effect_calls_run_one_at_a_time(workdir: Path) -> None:
    running = 0
    peak = 0

    async def gauge(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)  # yield: a concurrent sibling would get in here
        result = await call_next(invocation)
        running -= 1
        return result

    registry = file_registry()
    out = await ToolExecutor(registry, middlewares=[gauge]).execute(
        [
            call("write", {"path": "f.txt", "content": "1"}, "w1"),
            call("read", {"path": "f.txt"}, "r1"),
            call("edit", {"path": "f.txt", "old_text": "1", "new_text": "2"}, "e1"),
            call("read", {"path": "f.txt"}, "r2"),
        ],
        ctx(workdir),
    )
    assert peak == 1
    assert [r.model_text for r in out.results][1::2] == ["1", "2"]


async def test_cancellation_is_checked_before_each_call(workdir: Path) -> None:
    echo = EchoTool()
    context = ctx(workdir)

    async def cancel_after_first(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        result = await call_next(invocation)
        context.cancelled.set()
        return result

    registry = ToolRegistry([echo])
    out = await ToolExecutor(registry, middlewares=[cancel_after_first]).execute(
        [call("echo", {"text": str(i)}, f"c{i}") for i in range(3)], context
    )
    assert [a.text for a in echo.runs] == ["0"]
    assert [r.status for r in out.results] == [
        ToolStatus.COMPLETED,
        ToolStatus.CANCELLED,
        ToolStatus.CANCELLED,
    ]
    assert out.cancelled


async def test_suspension_stops_the_batch(workdir: Path) -> None:
    echo = EchoTool()

    async def suspend_b(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        if invocation.args.model_dump().get("text") == "b":
            return ToolResult(
                call_id=invocation.call.id,
                tool="echo",
                status=ToolStatus.SUSPENDED,
                model_text="waiting for approval",
                display="waiting",
            )
        return await call_next(invocation)

    registry = ToolRegistry([echo])
    out = await ToolExecutor(registry, middlewares=[suspend_b]).execute(
        [call("echo", {"text": t}, f"c{t}") for t in "abc"], ctx(workdir)
    )
    assert out.suspended_at == 1
    assert [r.call_id for r in out.results] == ["ca", "cb"]
    assert [a.text for a in echo.runs] == ["a"]


async def test_tool_crash_becomes_error_observation(workdir: Path) -> None:
    class Broken(EchoTool):
        name = "broken"

        async def run(self, args: EchoArgs, ctx: ToolContext) -> ToolOutput:
            raise RuntimeError("disk on fire")

    out = await ToolExecutor(ToolRegistry([Broken()])).execute([call("broken", {})], ctx(workdir))
    assert out.results[0].status is ToolStatus.ERROR
    assert "RuntimeError: disk on fire" in out.results[0].model_text
    assert "Traceback" not in out.results[0].model_text


async def test_progress_events_are_emitted_per_call(workdir: Path) -> None:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    executor = ToolExecutor(ToolRegistry([EchoTool()]), emit=emit)
    await executor.execute(
        [call("echo", {"text": "x"}, "c1"), call("nope", {}, "c2")], ctx(workdir)
    )
    assert [type(e).__name__ for e in events] == ["ToolStarted", "ToolFinished", "ToolFinished"]
    started, finished, unknown = events
    assert isinstance(started, ToolStarted) and started.tool == "echo"
    assert isinstance(finished, ToolFinished) and finished.status is ToolStatus.COMPLETED
    assert isinstance(unknown, ToolFinished) and unknown.status is ToolStatus.ERROR


def test_tool_specs_carry_the_argument_model_schema() -> None:
    spec = WriteTool().spec()
    assert spec.name == "write"
    assert spec.parameters["type"] == "object"
    assert set(spec.parameters["properties"]) == {"path", "content"}
    assert spec.parameters["required"] == ["path", "content"]
    assert spec.parameters["additionalProperties"] is False


def test_registry_refuses_tools_that_use_runtime_markers() -> None:
    class SneakyArgs(ToolArgs):
        approved: bool = False

    class Sneaky(Tool[SneakyArgs]):
        name = "sneaky"
        description = "x"
        args_model = SneakyArgs

        async def run(self, args: SneakyArgs, ctx: ToolContext) -> ToolOutput:
            return ToolOutput("")

    registry = ToolRegistry()
    try:
        registry.register(Sneaky())
    except ValueError as exc:
        assert "runtime-owned" in str(exc)
    else:
        raise AssertionError("a tool declaring 'approved' must be refused")


async def test_a_crashing_middleware_fails_closed(workdir: Path) -> None:
    echo = EchoTool()

    async def broken(invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        raise ConnectionError("redis went away")

    registry = ToolRegistry([echo])
    out = await ToolExecutor(registry, middlewares=[broken]).execute(
        [call("echo", {"text": "x"})], ctx(workdir)
    )
    assert out.results[0].status is ToolStatus.ERROR
    assert "not executed" in out.results[0].model_text
    assert echo.runs == []
