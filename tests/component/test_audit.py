"""The global audit trail on a real Redis: what each kind of event records (and what it never
records), its bound, that a failing Redis never breaks the caller, and `clawgate audit tail`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from bot.cli import main
from runtime.approval.grants import GrantTerms
from runtime.audit import AuditEntry, AuditLog, arguments_digest
from runtime.audit_search import parse_moment
from runtime.canonical import canonical_json
from runtime.executor import ToolExecutor
from runtime.models import Actor, ConversationRef, StopReason, ToolCall
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.store.keys import Keys
from runtime.tools.base import ToolContext
from runtime.tools.files import ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore
from tests.conftest import sync_client_for
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_runtime

BOB = Actor(platform="slack", user_id="UBOB")
ELSEWHERE = ConversationRef(platform="console", id="console:elsewhere")
REPO = Path(__file__).resolve().parents[2]
SENTINEL = "AUDIT-SENTINEL-7f3a"


def audit_log(redis: aioredis.Redis, maxlen: int = 100_000) -> AuditLog:
    return AuditLog(redis, Keys(PREFIX), maxlen)


async def trail(redis: aioredis.Redis) -> list[AuditEntry]:
    return await audit_log(redis).newest(10_000)


def of(entries: list[AuditEntry], event: str) -> list[AuditEntry]:
    return [e for e in entries if e.event == event]


async def raw_entries(redis: aioredis.Redis) -> list[tuple[str, dict[str, str]]]:
    return cast(list[tuple[str, dict[str, str]]], await redis.xrange(Keys(PREFIX).audit()))


async def raw_stream(redis: aioredis.Redis) -> str:
    """Everything stored in the stream, as one text to search."""
    return json.dumps(await raw_entries(redis))


async def said(texts: list[str], text: str) -> None:
    texts.append(text)


# --- what is recorded ---------------------------------------------------------------------


async def test_approval_round_trip_through_chat_commands(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "victim.txt").write_text("precious")
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    answers: list[str] = []

    asked = await dispatch(
        runtime, "s1", "run: rm victim.txt", ALICE, HERE, lambda t: said(answers, t)
    )
    assert asked is not None and asked.approval_id is not None
    approval_id = asked.approval_id
    done = await dispatch(
        runtime, "s1", f"/approve {approval_id}", ADMIN, HERE, lambda t: said(answers, t)
    )
    assert done is not None and done.stop_reason is StopReason.FINAL
    assert not (workdir / "victim.txt").exists()

    entries = await trail(redis)
    events = [e.event for e in entries]
    assert events == [
        "tool_executed",  # suspended by the risk policy
        "approval_requested",
        "command",
        "approval_decided",
        "tool_executed",  # the approved call
        "approval_consumed",
    ]
    suspended, requested, command, decided, executed, consumed = entries

    assert suspended.fields["status"] == "suspended" and suspended.actor == ALICE.key
    assert suspended.fields["tool"] == "bash" and suspended.fields["session"] == "s1"

    assert requested.actor == ALICE.key
    assert requested.fields["approval"] == approval_id
    assert requested.fields["tool"] == "bash"
    assert requested.fields["conversation"] == HERE.id
    assert requested.fields["requester"] == ALICE.key
    assert "rm" in requested.fields["reasons"]
    assert int(requested.fields["expires_at"]) > requested.at

    assert command.actor == ADMIN.key
    assert command.fields["name"] == "approve" and command.fields["approval"] == approval_id
    assert command.fields["session"] == "s1" and command.fields["conversation"] == HERE.id

    assert decided.actor == ADMIN.key and decided.fields["decision"] == "approved"
    assert decided.fields["approval"] == approval_id and decided.fields["scope"] == "once"

    assert executed.fields["status"] == "completed"
    assert executed.fields["approval"] == approval_id
    assert float(executed.fields["duration_ms"]) >= 0

    assert consumed.actor == ADMIN.key
    assert consumed.fields["status"] == "completed" and consumed.fields["approval"] == approval_id
    # Ordinary messages are never recorded as text.
    assert "rm victim.txt" not in await raw_stream(redis)
    for entry in entries:
        assert entry.at > 0 and entry.id


async def test_reject_records_the_reason(redis: aioredis.Redis, workdir: Path) -> None:
    (workdir / "victim.txt").write_text("precious")
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    asked = await runtime.run("s2", "run: rm victim.txt", ALICE, HERE)
    assert asked.approval_id is not None
    answers: list[str] = []
    text = f"/reject {asked.approval_id} keep the file"
    await dispatch(runtime, "s2", text, ADMIN, HERE, lambda t: said(answers, t))

    entries = await trail(redis)
    (command,) = of(entries, "command")
    assert command.fields["name"] == "reject" and command.fields["reason"] == "keep the file"
    (decided,) = of(entries, "approval_decided")
    assert decided.fields["decision"] == "rejected"
    assert decided.fields["reason"] == "keep the file"
    assert "scope" not in decided.fields
    assert not of(entries, "approval_consumed")


async def test_refusals_say_who_and_why(redis: aioredis.Redis, workdir: Path) -> None:
    (workdir / "victim.txt").write_text("precious")
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    asked = await runtime.run("s3", "run: rm victim.txt", ALICE, HERE)
    approval_id = asked.approval_id
    assert approval_id is not None

    assert not (await runtime.decide(approval_id, True, BOB, HERE)).accepted
    assert not (await runtime.decide(approval_id, True, ALICE, HERE)).accepted
    assert not (await runtime.decide(approval_id, True, ADMIN, ELSEWHERE)).accepted
    assert not (await runtime.decide("nosuchid", False, ADMIN, HERE)).accepted
    refusal, _ = await runtime.precheck(approval_id, BOB, HERE)
    assert refusal is not None
    assert (await runtime.decide(approval_id, True, ADMIN, HERE)).accepted
    assert not (await runtime.decide(approval_id, False, ADMIN, HERE)).accepted
    said, withdrawn = await runtime.decisions.withdraw(  # a stranger's /cancel
        *(await runtime.approvals.load(approval_id) or pytest.fail("no record")), BOB, HERE
    )
    assert "cannot cancel" in said and not withdrawn

    refused = of(await trail(redis), "approval_refused")
    seen = [(e.actor, e.fields.get("attempt"), e.fields["why"]) for e in refused]
    assert seen == [
        (BOB.key, "approve", "unauthorized"),
        (ALICE.key, "approve", "unauthorized"),  # requesters may not approve their own calls
        (ADMIN.key, "approve", "wrong_conversation"),
        (ADMIN.key, "reject", "unknown_id"),
        (BOB.key, None, "unauthorized"),  # a button click, prechecked
        (ADMIN.key, "reject", "already_decided"),
        (BOB.key, "cancel", "unauthorized"),
    ]
    assert refused[0].fields["approval"] == approval_id
    assert "not an approver" in refused[0].fields["message"]
    assert refused[3].fields["approval"] == "nosuchid" and "tool" not in refused[3].fields
    assert "already decided by" in refused[5].fields["message"]


async def test_expired_cancelled_and_rule_added(redis: aioredis.Redis, workdir: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (workdir / name).write_text(name)
    hasty, _ = make_runtime(redis, workdir, DemoProvider(), timeout_s=0.3)
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    # Expired by the sweeper.
    first = await hasty.run("s4", "run: rm a.txt", ALICE, HERE)
    await asyncio.sleep(0.4)
    assert await hasty.sweep() == 1
    # Withdrawn with /cancel.
    second = await runtime.run("s5", "run: rm b.txt", ALICE, HERE)
    answers: list[str] = []
    await dispatch(runtime, "s5", "/cancel", ALICE, HERE, lambda t: said(answers, t))
    assert "withdrawn" in answers[-1]
    # Approved always: a standing rule.
    third = await runtime.run("s6", "run: rm c.txt", ALICE, HERE)
    assert third.approval_id is not None
    decision = await runtime.decide(third.approval_id, True, ADMIN, HERE, always=GrantTerms())
    assert "now allowed" in decision.message

    entries = await trail(redis)
    (expired,) = of(entries, "approval_expired")
    assert expired.fields["approval"] == first.approval_id
    assert expired.fields["tool"] == "bash" and expired.fields["requester"] == ALICE.key
    (cancelled,) = of(entries, "approval_cancelled")
    assert cancelled.fields["approval"] == second.approval_id and cancelled.actor == ALICE.key
    (command,) = of(entries, "command")
    assert command.fields["name"] == "cancel" and command.actor == ALICE.key
    (rule,) = of(entries, "grant_added")
    assert rule.actor == ADMIN.key and rule.fields["rule"] == "bash rm"
    assert rule.fields["conversation"] == HERE.id and rule.fields["approval"] == third.approval_id
    assert rule.fields["scope"] == HERE.id and rule.fields["grant"].startswith("g")
    (decided,) = of(entries, "approval_decided")
    assert decided.fields["scope"] == "always"


async def test_tool_calls_are_recorded_without_their_arguments(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    result = await runtime.run("s7", f"write notes.txt: {SENTINEL}", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL
    assert SENTINEL in (workdir / "notes.txt").read_text()
    denied = await runtime.run("s7", "run: rm -rf /", ALICE, HERE)
    assert denied.stop_reason is StopReason.FINAL

    executed = of(await trail(redis), "tool_executed")
    write, rm = executed
    assert write.fields["tool"] == "write" and write.fields["status"] == "completed"
    assert write.fields["arg_keys"] == "content,path"
    expected = canonical_json({"content": f"{SENTINEL}\n", "path": "notes.txt"})
    assert write.fields["args_sha256"] == hashlib.sha256(expected.encode()).hexdigest()
    assert write.fields["session"] == "s7" and write.fields["conversation"] == HERE.id
    assert write.actor == ALICE.key and write.fields["call"]
    assert rm.fields["tool"] == "bash" and rm.fields["status"] == "denied"  # refused by policy
    assert rm.fields["arg_keys"] == "command"
    stored = await raw_stream(redis)
    assert SENTINEL not in stored and "rm -rf" not in stored


async def test_calls_that_fail_to_prepare_are_recorded_as_errors(
    redis: aioredis.Redis, workdir: Path
) -> None:
    executor = ToolExecutor(ToolRegistry([ReadTool(), WriteTool()]), audit=audit_log(redis))
    ctx = ToolContext(session="s8", workdir=workdir, actor=ALICE, conversation=HERE)
    calls = [
        ToolCall(id="c1", name="nope", arguments=json.dumps({"secret": SENTINEL})),
        ToolCall(id="c2", name="read", arguments=f"{{not json {SENTINEL}"),
        ToolCall(id="c3", name="write", arguments=json.dumps({"path": SENTINEL})),
    ]
    outcome = await executor.execute(calls, ctx)
    assert [r.status.value for r in outcome.results] == ["error"] * 3

    entries = of(await trail(redis), "tool_executed")
    assert [(e.fields["call"], e.fields["status"]) for e in entries] == [
        ("c1", "error"),
        ("c2", "error"),
        ("c3", "error"),
    ]
    unknown, unparseable, invalid = entries
    # A name the model made up may be any text: only its hash and size.
    assert unknown.fields["tool"] == "(unknown)" and unknown.fields["arg_keys"] == "secret"
    assert unknown.fields["tool_sha256"] == hashlib.sha256(b"nope").hexdigest()
    assert unknown.fields["tool_chars"] == "4"
    assert len(unknown.fields["args_sha256"]) == 64
    assert "args_sha256" not in unparseable.fields and "arg_keys" not in unparseable.fields
    assert invalid.fields["arg_keys"] == "path"
    assert "duration_ms" not in unknown.fields  # nothing went through the chain
    assert SENTINEL not in await raw_stream(redis)


async def test_risk_reasons_and_standing_rules_are_stored_with_secrets_masked(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    answers: list[str] = []
    asked = await dispatch(
        runtime,
        "s12",
        "run: mysql --password=PWVAL-4242 -e 'select 1'",
        ALICE,
        HERE,
        lambda t: said(answers, t),
    )
    assert asked is not None and asked.approval_id is not None
    text = f"/approve {asked.approval_id} always"
    await dispatch(runtime, "s12", text, ADMIN, HERE, lambda t: said(answers, t))
    quoted = await runtime.run("s13", 'run: bash -c "$CMD --token=TOKVAL-99"', ALICE, HERE)
    assert quoted.approval_id is not None

    entries = await trail(redis)
    (rule,) = of(entries, "grant_added")
    assert rule.fields["rule"] == "bash mysql --password=[redacted] -e 'select 1'"  # a client
    first, second = of(entries, "approval_requested")
    assert "mysql" in first.fields["reasons"]
    # The reason quotes the command, the secret masked.
    assert "$CMD --token=[redacted]" in second.fields["reasons"]
    stored = await raw_stream(redis)
    assert "PWVAL-4242" not in stored and "TOKVAL-99" not in stored


async def test_a_lone_surrogate_in_arguments_never_breaks_the_run(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [calls(("c1", "read", {"path": "\ud800"})), reply("done")]
    provider = OpenAIProvider("fake", api_key="sk-test", base_url=fake_openai.base_url)
    store = TraceStore(redis, Keys(PREFIX), 3600)
    runtime, _ = make_runtime(redis, workdir, provider, tracer=Tracer("metadata", store))

    result = await runtime.run("s14", "read it", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL and result.final_text == "done"
    (executed,) = of(await trail(redis), "tool_executed")
    assert executed.fields["status"] == "error"  # no such file
    expected = hashlib.sha256('{"path":"\ud800"}'.encode("utf-8", "surrogatepass")).hexdigest()
    assert executed.fields["args_sha256"] == expected
    assert arguments_digest('{"path":"\ud800"}') == (expected, "path")
    # The trace holds the same hash (and is stored at all).
    assert result.trace_id is not None
    doc = await store.load(result.trace_id)
    assert doc is not None
    (call,) = [s for s in doc.spans() if s.name == "tool.call"]
    assert call.attributes["args_sha256"] == expected
    # Fields that cannot be written as they are are written with the surrogate replaced.
    await audit_log(redis).record("odd", "someone", note="a\udc80b")
    (odd,) = of(await trail(redis), "odd")
    assert odd.fields["note"] == "a?b"


async def test_an_audit_entry_that_cannot_be_built_never_breaks_the_run(
    redis: aioredis.Redis,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(canonical: str) -> tuple[str | None, str]:
        raise UnicodeEncodeError("utf-8", canonical, 0, 1, "surrogates not allowed")

    monkeypatch.setattr("runtime.executor.arguments_digest", broken)
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    with caplog.at_level(logging.WARNING, logger="runtime.executor"):
        result = await runtime.run("s15", "write a.txt: hello", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL
    assert (workdir / "a.txt").read_text() == "hello\n"
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "tool_executed entry was not recorded" in warning
    assert not of(await trail(redis), "tool_executed")

    def unprintable(value: object) -> str:
        raise ValueError("cannot show it")

    monkeypatch.setattr("runtime.audit._text", unprintable)
    with caplog.at_level(logging.WARNING, logger="runtime.audit"):
        fields = AuditLog.entry("command", "someone", name="help")
    assert fields["event"] == "command" and fields["incomplete"] == "true"
    assert "name" not in fields


async def test_earlier_calls_are_recorded_before_a_call_with_side_effects(
    redis: aioredis.Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's entries are written together, except that calls which may have had side
    effects are on record before a later call that is not parallel-safe starts (a crash
    during it must not lose them); a one-call batch is still one write."""
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    audit = audit_log(redis)
    writes: list[list[str]] = []
    record_many = audit.record_many

    async def spy(entries: list[dict[str, str]]) -> None:
        writes.append([e["call"] for e in entries])
        await record_many(entries)

    monkeypatch.setattr(audit, "record_many", spy)
    executor = ToolExecutor(ToolRegistry([ReadTool(), WriteTool()]), audit=audit)
    ctx = ToolContext(session="s16", workdir=workdir, actor=ALICE, conversation=HERE)

    def call(call_id: str, tool: str, **args: str) -> ToolCall:
        return ToolCall(id=call_id, name=tool, arguments=json.dumps(args))

    await executor.execute([call("w0", "write", path="c.txt", content="c")], ctx)
    assert writes == [["w0"]]
    writes.clear()
    batch = [
        call("r1", "read", path="a.txt"),
        call("r2", "read", path="b.txt"),
        call("w1", "write", path="d.txt", content="d"),
        call("w2", "write", path="e.txt", content="e"),
        call("r3", "read", path="a.txt"),
    ]
    await executor.execute(batch, ctx)
    assert writes == [["r1", "r2"], ["w1"], ["w2", "r3"]]
    entries = of(await trail(redis), "tool_executed")
    assert [e.fields["call"] for e in entries] == ["w0", "r1", "r2", "w1", "w2", "r3"]


async def test_every_entry_carries_a_trace_field(
    redis: aioredis.Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = audit_log(redis)
    await audit.record("outside_a_run", "someone")
    monkeypatch.setattr("runtime.audit.current_trace_id", lambda: "trace-1234")
    await audit.record("inside_a_run", "someone", note="x")
    raw = await raw_entries(redis)
    assert [fields["trace"] for _, fields in raw] == ["", "trace-1234"]
    # And the runtime's entries have the field too.
    monkeypatch.undo()
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    await runtime.run("s9", "run: rm x", ALICE, HERE)
    for _, fields in (await raw_entries(redis))[2:]:
        assert "trace" in fields


async def test_entries_carry_the_trace_of_their_run(redis: aioredis.Redis, workdir: Path) -> None:
    (workdir / "victim.txt").write_text("precious")
    runtime, _ = make_runtime(
        redis, workdir, DemoProvider(), tracer=Tracer("metadata")
    )  # no store: ids only
    asked = await runtime.run("s11", "run: rm victim.txt", ALICE, HERE)
    assert asked.approval_id is not None and asked.trace_id
    assert not (await runtime.decide(asked.approval_id, True, BOB, HERE)).accepted
    done = await runtime.decide(asked.approval_id, True, ADMIN, HERE)
    assert done.run is not None and done.run.trace_id

    traces = [(e.event, e.trace) for e in await trail(redis)]
    first, resumed = asked.trace_id, done.run.trace_id
    assert first != resumed
    assert traces == [
        ("tool_executed", first),
        ("approval_requested", first),
        # Decided outside any run: the trace of the run that asked.
        ("approval_refused", first),
        ("approval_decided", first),
        ("tool_executed", resumed),
        ("approval_consumed", resumed),
    ]


async def test_record_skips_none_and_keeps_types_readable(redis: aioredis.Redis) -> None:
    audit = audit_log(redis)
    await audit.record("policy_changed", "slack:UADMIN", tool="bash", old="allow", new=None, n=3)
    (entry,) = await audit.newest(5)
    assert entry.event == "policy_changed" and entry.actor == "slack:UADMIN"
    assert entry.fields == {"tool": "bash", "old": "allow", "n": "3"}
    assert abs(entry.at - time.time() * 1000) < 5000


async def test_the_stream_is_bounded(redis: aioredis.Redis) -> None:
    audit = audit_log(redis, maxlen=1000)
    for batch in range(10):
        await audit.record_many([audit.entry("tick", n=batch * 500 + i) for i in range(500)])
    length = await redis.xlen(Keys(PREFIX).audit())
    assert 1000 <= length < 1200  # trimmed approximately, by whole stream nodes
    (newest,) = await audit.newest(1)
    assert newest.fields["n"] == "4999"


async def test_a_redis_failure_never_reaches_the_caller(
    redis: aioredis.Redis, workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = aioredis.from_url("redis://127.0.0.1:9/0", decode_responses=True)
    try:
        broken = AuditLog(dead, Keys(PREFIX))
        with caplog.at_level(logging.WARNING, logger="runtime.audit"):
            await broken.record("command", "someone", name="help")
        assert len(caplog.records) == 1
        assert "not recorded" in caplog.records[0].getMessage()
        # A run whose audit writes all fail still does its work, approvals included.
        runtime, _ = make_runtime(redis, workdir, DemoProvider(), audit=broken)
        result = await runtime.run("s10", "write a.txt: hello", ALICE, HERE)
        (workdir / "victim.txt").write_text("x")
        asked = await runtime.run("s11", "run: rm victim.txt", ALICE, HERE)
        assert asked.approval_id is not None
        decision = await runtime.decide(asked.approval_id, True, ADMIN, HERE)
    finally:
        await dead.aclose()
    assert result.stop_reason is StopReason.FINAL
    assert (workdir / "a.txt").read_text() == "hello\n"
    assert decision.accepted and not (workdir / "victim.txt").exists()


# --- clawgate audit tail -------------------------------------------------------------------


@pytest.fixture
def cli_env(cli_env: str, empty_redis: None) -> str:
    """The CLI's settings (tests/component/conftest.py), on an empty database."""
    return cli_env


def seed(
    redis_url: str, *entries: tuple[str, str, dict[str, str]], at_ms: int | None = None
) -> None:
    """Append (event, actor, fields) entries; `at_ms` back-dates them (stream id and `at`)."""
    client = sync_client_for(redis_url)
    try:
        for i, (event, actor, fields) in enumerate(entries):
            data = {**fields, "event": event, "actor": actor, "trace": "t-" + event}
            if at_ms is None:
                data["at"] = str(int(time.time() * 1000))
                client.xadd(Keys(PREFIX).audit(), data)  # type: ignore[arg-type]
            else:
                data["at"] = str(at_ms + i)
                client.xadd(Keys(PREFIX).audit(), data, id=f"{at_ms + i}-0")  # type: ignore[arg-type]
    finally:
        client.close()


def test_tail_prints_a_table_of_the_newest_entries(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(cli_env, *[("tool_executed", "console:alice", {"n": str(i)}) for i in range(25)])
    seed(cli_env, ("approval_refused", "slack:UBOB", {"why": "unauthorized", "message": "a b"}))
    assert main(["audit", "tail"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TIME", "EVENT", "ACTOR", "TRACE", "DETAILS"]
    assert len(lines) == 1 + 20
    assert "n=6" in lines[1] and "n=24" in lines[-2]
    last = lines[-1]
    assert last.split()[2:5] == ["approval_refused", "slack:UBOB", "t-approval_refused"]
    assert last.endswith('why=unauthorized message="a b"')

    assert main(["audit", "tail", "-n", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_tail_json_lines_parse(cli_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed(cli_env, ("command", "slack:UADMIN", {"name": "approve", "approval": "abc"}))
    seed(cli_env, ("approval_decided", "slack:UADMIN", {"decision": "approved"}))
    assert main(["audit", "tail", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["event"] for r in rows] == ["command", "approval_decided"]
    assert rows[0]["fields"] == {"name": "approve", "approval": "abc"}
    assert rows[0]["actor"] == "slack:UADMIN" and rows[0]["trace"] == "t-command"
    assert isinstance(rows[0]["at"], int) and rows[0]["time"].endswith("+00:00")


def test_tail_since_filters_by_time(cli_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    now = int(time.time() * 1000)
    seed(cli_env, ("old", "", {}), at_ms=now - 3 * 3600 * 1000)
    seed(cli_env, ("recent", "", {}), at_ms=now - 30 * 60 * 1000)
    seed(cli_env, ("new", "", {}))
    assert main(["audit", "tail", "--since", "1h", "--json"]) == 0
    events = [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()]
    assert events == ["recent", "new"]
    assert main(["audit", "tail", "--since", "1d", "-n", "1", "--json"]) == 0
    events = [json.loads(line)["event"] for line in capsys.readouterr().out.splitlines()]
    assert events == ["new"]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime((now - 3600 * 1000) / 1000))
    assert main(["audit", "tail", "--since", iso, "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["audit", "tail", "--since", "1m"]) == 0
    assert "new" in capsys.readouterr().out


def test_parse_moment_accepts_durations_and_iso_times() -> None:
    now = 1_700_000_000.0
    assert parse_moment("10m", now) == (now - 600) * 1000
    assert parse_moment("2h", now) == (now - 7200) * 1000
    assert parse_moment("1d", now) == (now - 86_400) * 1000
    assert parse_moment("2023-11-14T22:13:20Z", now) == now * 1000
    assert parse_moment("2023-11-14T22:13:20+00:00", now) == now * 1000


@pytest.mark.parametrize("args", [["--since", "yesterday"], ["--since", "10x"], ["-n", "0"]])
def test_bad_arguments_exit_2_with_one_line(
    cli_env: str, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert main(["audit", "tail", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("clawgate: ") and args[0] in line


def test_tail_needs_redis_and_says_so_when_it_is_down(
    cli_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_URL")
    assert main(["audit", "tail"]) == 2
    assert "REDIS_URL: required for `clawgate audit`" in capsys.readouterr().err
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:9/0")
    assert main(["audit", "tail"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("clawgate: cannot read the audit trail")


def test_tail_of_an_empty_trail(cli_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "tail"]) == 0
    assert capsys.readouterr().out == "No audit entries.\n"
    assert main(["audit", "tail", "--json"]) == 0
    assert capsys.readouterr().out == ""


async def test_parallel_calls_are_recorded_in_the_models_order(
    redis: aioredis.Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent reads finish in any order; their entries follow the batch's order."""
    for name in ("slow.txt", "fast.txt"):
        (workdir / name).write_text(name)
    run = ReadTool.run

    async def slow_first(self: ReadTool, args: Any, ctx: ToolContext) -> Any:
        if args.path == "slow.txt":
            await asyncio.sleep(0.2)
        return await run(self, args, ctx)

    monkeypatch.setattr(ReadTool, "run", slow_first)
    executor = ToolExecutor(ToolRegistry([ReadTool()]), audit=audit_log(redis))
    ctx = ToolContext(session="s17", workdir=workdir, actor=ALICE, conversation=HERE)
    batch = [
        ToolCall(id=f"c{i}", name="read", arguments=json.dumps({"path": path}))
        for i, path in enumerate(("slow.txt", "fast.txt"))
    ]
    await executor.execute(batch, ctx)
    entries = of(await trail(redis), "tool_executed")
    assert [e.fields["call"] for e in entries] == ["c0", "c1"]
