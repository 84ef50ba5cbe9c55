"""Bounded context on a real Redis: a long thread is compacted into a summary the model
writes (the real `openai` client against the fake server, or a scripted model), the summary
survives restarts and is audited, a crash or a model error during compaction loses and
duplicates nothing, and runs that hold only a window of history keep the session's indices
(retakes, approvals, answer keys)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from runtime.agent import Runtime
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import Reply
from runtime.context.compactor import compacting
from runtime.explorer import Explorer
from runtime.loop import INTERRUPTED, OUTCOME_UNKNOWN, answer_key
from runtime.models import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    ToolStatus,
    UserMessage,
)
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyService
from runtime.providers.base import SUMMARY_PROMPT, Provider, ProviderError
from runtime.providers.openai_provider import OpenAIProvider, to_openai_message
from runtime.runtime_config import RuntimeConfig
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.store.summary import SummaryStore
from runtime.tools.explore import ExploreTool
from runtime.tools.files import ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry
from tests.component.test_retake import Calls, Crash
from tests.component.test_tracing import load, named, traced
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, RecordingChannel, make_runtime

KEYS = Keys(PREFIX)
BUDGET = 20_000


class Model:
    """A model for both kinds of request: `summaries` answer requests for a summary, `steps`
    the run's own; a `Crash` is raised (the process dies there), an exception raised."""

    name = "scripted"
    offline_demo = False

    def __init__(
        self,
        steps: Sequence[AssistantMessage | BaseException] = (),
        summaries: Sequence[str | BaseException] = (),
    ) -> None:
        self.steps = list(steps)
        self.summaries = list(summaries)
        self.requests: list[list[Message]] = []

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        self.requests.append(list(messages))
        summarizing = messages[0].content == SUMMARY_PROMPT
        step = (self.summaries if summarizing else self.steps).pop(0)
        if isinstance(step, BaseException):
            raise step
        return AssistantMessage(content=step) if isinstance(step, str) else step


def with_budget(runtime: Runtime, budget: int = BUDGET) -> Runtime:
    """The runtime's loop with a context of `budget` characters (as CLAWGATE_CONTEXT_BUDGET)."""
    runtime.loop.context = compacting(runtime.provider, runtime.history, budget, runtime.audit)
    return runtime


def budgeted(
    redis: aioredis.Redis, workdir: Path, model: Provider, budget: int = BUDGET
) -> tuple[Runtime, RecordingChannel]:
    runtime, channel = make_runtime(redis, workdir, model, liveness_ttl=2)
    return with_budget(runtime, budget), channel


def turn(i: int) -> list[Message]:
    call = ToolCall(id=f"old_{i}", name="read", arguments=f'{{"path": "notes-{i}.txt"}}')
    return [
        UserMessage(content=f"what does notes-{i}.txt say?", actor=ALICE.key),
        AssistantMessage(tool_calls=[call]),
        ToolMessage(
            tool_call_id=call.id,
            name="read",
            content=f"note {i}: " + "x" * 150,
            status=ToolStatus.COMPLETED,
        ),
        AssistantMessage(content=f"notes-{i}.txt holds note {i}."),
    ]


async def fill(runtime: Runtime, session: str, count: int) -> None:
    messages = [m for i in range(count // 4) for m in turn(i)]
    for start in range(0, len(messages), 1000):
        await runtime.history.append(session, *messages[start : start + 1000])


def sent_chars(request: dict[str, Any]) -> int:
    return len(json.dumps(request["messages"]))


def replies(channel: RecordingChannel) -> list[Reply]:
    return channel.of(Reply)


def says(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


def asks(*items: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in items])


def write(call_id: str, path: str) -> tuple[str, str, str]:
    return call_id, "write", f'{{"path": "{path}", "content": "x"}}'


async def test_a_10000_message_thread_answers_with_a_bounded_request_and_keeps_its_summary(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    provider = OpenAIProvider("fake", api_key="sk-test", base_url=fake_openai.base_url)
    runtime, channel = budgeted(redis, workdir, provider)
    await fill(runtime, "long", 10_000)
    fake_openai.script = [reply("SUMMARY-ONE: notes were read, one by one."), reply("answer one")]

    result = await runtime.run("long", "which notes did we read?", ALICE, HERE)

    assert result.final_text == "answer one"
    summarizing, answering = fake_openai.requests
    assert summarizing["messages"][0]["content"] == SUMMARY_PROMPT
    assert "tools" not in summarizing
    # Both requests are bounded by the budget (plus the prompts), not by the thread's length.
    assert sent_chars(summarizing) < BUDGET + 3_000
    assert sent_chars(answering) < BUDGET + 3_000
    assert "SUMMARY-ONE" in answering["messages"][0]["content"]
    assert answering["messages"][-1]["content"] == "which notes did we read?"
    assert len(answering["messages"]) < 200
    # The summary is durable and says what it stands for; history is whole.
    summary = await SummaryStore(redis, KEYS).current("long")
    assert summary is not None and summary.text.startswith("SUMMARY-ONE")
    assert summary.since == 0 and 9_000 < summary.upto <= 10_000
    assert summary.omitted > 0  # 10,000 messages never fit one summary request
    assert len(await runtime.history.load("long")) == 10_002
    audited = [e for e in await runtime.audit.newest(50) if e.event == "context_compacted"]
    assert [(e.fields["session"], e.fields["upto"]) for e in audited] == [
        ("long", str(summary.upto))
    ]
    assert [r.text for r in replies(channel)] == ["answer one"]

    # Another process, later: it reads the summary and the turns after it, and asks nothing
    # but the answer.
    again, channel = budgeted(redis, workdir, provider)
    fake_openai.script = [reply("answer two")]
    await again.run("long", "and now?", ALICE, HERE)
    (request,) = fake_openai.requests[2:]
    assert "SUMMARY-ONE" in request["messages"][0]["content"]
    assert sent_chars(request) < BUDGET
    assert len(await SummaryStore(redis, KEYS).all("long")) == 1
    (posted,) = replies(channel)
    assert posted.key == answer_key("long", 10_003)  # the session's index, not the window's


async def test_a_crash_during_compaction_loses_nothing_and_the_retake_compacts(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Model(steps=[says("the answer")], summaries=[Crash(), "SUMMARY after the crash"])
    first, _ = budgeted(redis, workdir, model)
    await fill(first, "s1", 2_000)
    try:
        await first.run("s1", "question", ALICE, HERE, job="j1")
    except Crash:
        pass
    else:  # pragma: no cover
        raise AssertionError("the run should have died in the compaction")
    assert await first.history.length("s1") == 2_001  # the message, once; nothing else
    assert await SummaryStore(redis, KEYS).current("s1") is None

    second, channel = budgeted(redis, workdir, model)
    result = await second.run("s1", "question", ALICE, HERE, job="j1")

    assert result.final_text == "the answer"
    history = await second.history.load("s1")
    assert len(history) == 2_002
    assert [m.content for m in history[2_000:]] == ["question", "the answer"]
    summaries = await SummaryStore(redis, KEYS).all("s1")
    assert [s.text for s in summaries] == ["SUMMARY after the crash"]
    assert [r.text for r in replies(channel)] == ["the answer"]


async def test_a_model_error_during_compaction_leaves_the_oldest_out_and_retries_next_time(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Model(
        steps=[says("one"), says("two")],
        summaries=[ProviderError("the model server answered HTTP 500"), "SUMMARY at last"],
    )
    runtime, _ = budgeted(redis, workdir, model)
    await fill(runtime, "s1", 1_000)

    assert (await runtime.run("s1", "first", ALICE, HERE)).final_text == "one"
    asked = model.requests[1]  # the answer's request, after the failed summary
    assert "are not shown here" in str(asked[0].content)
    assert len(json.dumps([to_openai_message(m) for m in asked])) < BUDGET + 3_000
    assert await SummaryStore(redis, KEYS).current("s1") is None

    assert (await runtime.run("s1", "second", ALICE, HERE)).final_text == "two"
    summary = await SummaryStore(redis, KEYS).current("s1")
    assert summary is not None and summary.text == "SUMMARY at last"
    assert "SUMMARY at last" in str(model.requests[3][0].content)
    assert len(await runtime.history.load("s1")) == 1_004


async def test_a_retake_behind_a_summary_keeps_the_sessions_indices(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """The run's turn begins after the summary: the retake reads from the summary's end."""
    model = Model(
        steps=[asks(write("c1", "a.txt"), write("c2", "b.txt"), write("c3", "c.txt")), says("ok")],
        summaries=["SUMMARY"],
    )
    crashing = Calls(crash=["c2"])
    first, _ = budgeted(redis, workdir, model)
    first.loop.middlewares.append(crashing)
    await fill(first, "s1", 1_000)
    with contextlib.suppress(Crash):
        await first.run("s1", "write three files", ALICE, HERE, job="j1")
    summary = await SummaryStore(redis, KEYS).current("s1")
    assert summary is not None and summary.upto < 1_000

    second, channel = budgeted(redis, workdir, model)
    second.loop.middlewares.append(crashing)
    result = await second.run("s1", "write three files", ALICE, HERE, job="j1")

    assert result.final_text == "ok" and result.steps == 2  # the recorded step counts
    assert crashing.ran == ["c1", "c2"]
    history = await second.history.load("s1")
    answers = {m.tool_call_id: m.content for m in history if isinstance(m, ToolMessage)}
    assert answers["c2"] == OUTCOME_UNKNOWN and answers["c3"] == INTERRUPTED
    assert [m.content for m in history if isinstance(m, UserMessage)][-1] == "write three files"
    assert sum(m.content == "write three files" for m in history if m.role == "user") == 1
    (posted,) = replies(channel)
    assert posted.key == answer_key("s1", len(history) - 1)


async def test_a_retake_of_a_run_compacted_past_its_own_start_reads_from_its_start(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """A long run over the budget by itself is compacted inside its own turn: a retake must
    still see the whole turn (how many steps it took, which call was running)."""
    for name in ("a", "b", "c"):
        (workdir / f"{name}.txt").write_text(name * 1_500)
    read = [asks((f"r{n}", "read", f'{{"path": "{n}.txt"}}')) for n in ("a", "b", "c")]
    model = Model(
        steps=[*read, asks(write("w1", "out.txt")), says("done")], summaries=["RUN SO FAR"]
    )
    crashing = Calls(crash=["w1"])
    first, _ = budgeted(redis, workdir, model, budget=4_000)
    first.loop.middlewares.append(crashing)
    with contextlib.suppress(Crash):
        await first.run("s1", "read and write", ALICE, HERE, job="j1")
    summary = await SummaryStore(redis, KEYS).current("s1")
    assert summary is not None and summary.upto > 0  # past the run's start, index 0

    second, channel = budgeted(redis, workdir, model, budget=4_000)
    second.loop.middlewares.append(crashing)
    result = await second.run("s1", "read and write", ALICE, HERE, job="j1")

    assert result.final_text == "done" and result.steps == 5
    history = await second.history.load("s1")
    answers = {m.tool_call_id: m.content for m in history if isinstance(m, ToolMessage)}
    assert answers["w1"] == OUTCOME_UNKNOWN
    assert [m.content for m in history if m.role == "user"] == ["read and write"]
    (posted,) = replies(channel)
    assert posted.key == answer_key("s1", len(history) - 1)


async def test_an_approval_resumed_behind_a_summary_keeps_the_sessions_indices(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "victim.txt").write_text("x")
    model = Model(
        steps=[asks(("b1", "bash", '{"command": "rm victim.txt"}')), says("removed")],
        summaries=["SUMMARY"],
    )
    runtime, channel = budgeted(redis, workdir, model)
    await fill(runtime, "s1", 1_000)
    asked = await runtime.run("s1", "remove it", ALICE, HERE)
    assert asked.approval_id is not None
    loaded = await runtime.approvals.load(asked.approval_id)
    assert loaded is not None
    assert loaded[1].history_len == await runtime.history.length("s1") == 1_002

    decision = await runtime.decide(asked.approval_id, True, ADMIN, HERE)

    assert decision.run is not None and decision.run.final_text == "removed"
    assert not (workdir / "victim.txt").exists()
    history = await runtime.history.load("s1")
    assert len(history) == 1_004
    (posted,) = replies(channel)
    assert posted.key == answer_key("s1", 1_003)
    resumed = model.requests[-1]
    assert "SUMMARY" in str(resumed[0].content) and len(resumed) < 200


async def test_an_explorers_long_exploration_is_compacted_in_its_own_session(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    for name in ("a", "b"):
        (workdir / f"{name}.txt").write_text(name * 1_500)
    provider = OpenAIProvider("fake", api_key="sk-test", base_url=fake_openai.base_url)
    audit = AuditLog(redis, KEYS)
    defaults = Defaults(enabled=("explore",), admins=frozenset({ADMIN.key}))
    policies = PolicyService(redis, KEYS, defaults, ("read", "write", "explore"), audit=audit)
    history = HistoryStore(redis, KEYS)
    explorer = Explorer(
        provider, [ReadTool()], history, 16_000, policies, audit, context_budget=3_000
    )
    registry = ToolRegistry([ReadTool(), WriteTool(), ExploreTool(explorer)], enabled=["explore"])
    runtime = Runtime(
        RuntimeConfig(workdir=workdir),
        provider,
        registry,
        history,
        RecordingChannel(),
        ApprovalStore(redis, KEYS),
        policies,
        audit=audit,
    )
    fake_openai.script = [
        calls(("p1", "explore", {"task": "What do a.txt and b.txt hold?"})),
        calls(("k1", "read", {"path": "a.txt"})),
        calls(("k2", "read", {"path": "b.txt"})),
        reply("CHILD SUMMARY: a.txt was read"),
        reply("a.txt holds a's, b.txt b's."),
        reply("Letters."),
    ]

    result = await runtime.run("s1", "what is in the files?", ALICE, HERE)

    assert result.final_text == "Letters."
    summarizing = fake_openai.requests[3]
    assert summarizing["messages"][0]["content"] == SUMMARY_PROMPT
    child_answer = fake_openai.requests[4]
    assert "CHILD SUMMARY" in child_answer["messages"][0]["content"]
    assert sent_chars(child_answer) < 3_000 + 1_000
    (child,) = [
        key.split("{")[1].split("}")[0] async for key in redis.scan_iter(f"{PREFIX}:*:summary")
    ]
    assert child.startswith("s1/explore-")
    for name in ("summary", "summaries"):  # gone with the child's history
        assert 0 < await redis.ttl(KEYS.session(child, name)) <= 7 * 86_400
    assert await SummaryStore(redis, KEYS).current("s1") is None


async def test_approval_store_reads_the_window_right_after_the_decision(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """The decision script returns no history: the window is read after it by index."""
    model = Model(steps=[asks(("b1", "bash", '{"command": "rm x"}'))])
    runtime, _ = budgeted(redis, workdir, model)
    asked = await runtime.run("s2", "remove x", ALICE, HERE)
    assert asked.approval_id is not None
    record, checkpoint = await ApprovalStore(redis, KEYS).load(asked.approval_id) or (None, None)
    assert record is not None and checkpoint is not None
    store = runtime.approvals
    from runtime.approval.decisions import checkpoint_hash  # noqa: PLC0415

    transition, window = await store.decide(
        record,
        False,
        ADMIN.key,
        "no",
        HERE.id,
        checkpoint_hash(checkpoint),
        "w",
        2.0,
        window=True,
    )
    assert transition.ok and window is not None
    assert window.base == 0 and window.end == await runtime.history.length("s2")
    assert [m.role for m in window.messages] == ["user", "assistant"]


async def test_a_compaction_is_traced_before_the_model_call_it_makes_room_for(
    redis: aioredis.Redis, workdir: Path
) -> None:
    model = Model(steps=[says("ok")], summaries=["SUMMARY"])
    runtime, _, store = traced(redis, workdir, model)
    with_budget(runtime)
    await fill(runtime, "s1", 1_000)

    result = await runtime.run("s1", "question", ALICE, HERE)

    doc = await load(store, result.trace_id)
    (step,) = named(doc.root, "agent.step")
    assert [s.name for s in step.children] == ["context.compact", "llm.call"]
    compact, llm = step.children
    summary = await SummaryStore(redis, KEYS).current("s1")
    assert summary is not None
    assert compact.attributes["upto"] == summary.upto and compact.attributes["since"] == 0
    assert compact.attributes["written"] is True and compact.attributes["summary_chars"] == 7
    # What was sent, as the context measured it: bounded, whatever the history holds.
    assert 0 < int(str(llm.attributes["message_chars"])) <= BUDGET
