"""Tool receipts on a real Redis: a completed call's receipt is in its audit entry and on its
span and verifies with `clawgate audit receipt`; a changed result hash, another key or an
unknown id does not; a failed or timed-out call has none; an approved call's carries its
approval."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from bot.cli import main
from bot.cli_approvals import run_approvals_command
from runtime import evidence_keys
from runtime.agent import Runtime
from runtime.audit import AuditEntry, AuditLog
from runtime.canonical import text_sha256
from runtime.executor import ToolExecutor
from runtime.loop import LoopOptions
from runtime.models import StopReason, ToolCall, ToolMessage
from runtime.outputs import output_path
from runtime.receipts import Receipt
from runtime.store.keys import Keys
from runtime.tools.base import ToolContext
from runtime.tools.bash import BashTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Sandbox, SandboxMode
from runtime.tracing.document import TraceDoc
from runtime.tracing.store import TraceStore
from tests.component.test_tracing import openai, traced
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX

KEY = "k1:" + "r" * 32
OTHER = "k2:" + "o" * 32
RING = evidence_keys.load(KEY)


@pytest.fixture
def cli_env(cli_env: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The CLI's settings (tests/component/conftest.py), keyed with k1."""
    monkeypatch.setenv("CLAWGATE_AUDIT_KEY", KEY)
    return cli_env


async def cli(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))  # `main` runs its own event loop


def keyed_runtime(
    redis: aioredis.Redis, workdir: Path, fake: FakeOpenAI
) -> tuple[Runtime, TraceStore]:
    runtime, _, store = traced(redis, workdir, openai(fake), loop=LoopOptions(keys=RING))
    return runtime, store


async def executed(runtime: Runtime) -> list[AuditEntry]:
    return [e for e in await runtime.audit.newest(1000) if e.event == "tool_executed"]


async def tool_span_attributes(store: TraceStore, trace_id: str | None) -> dict[str, Any]:
    assert trace_id is not None
    doc = await store.load(trace_id)
    assert isinstance(doc, TraceDoc)
    (span,) = [s for s in doc.root.walk() if s.name == "tool.call"]
    return dict(span.attributes)


async def rewrite(redis: aioredis.Redis, entry_id: str, **changed: str) -> None:
    """Someone with write access to Redis changes fields of one audit entry, keeping every
    entry's id (the stream rebuilt in order: Redis takes no id at or below its last one)."""
    key = Keys(PREFIX).audit()
    raw = cast(list[tuple[str, dict[str, str]]], await redis.xrange(key))
    await redis.delete(key)
    for stream_id, fields in raw:
        data: dict[Any, Any] = {**fields, **(changed if stream_id == entry_id else {})}
        await redis.xadd(key, data, id=stream_id)


async def test_a_completed_call_gets_a_receipt_that_verifies_and_a_changed_hash_does_not(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (workdir / "notes.txt").write_text("sentinel-4711\n")
    fake_openai.script = [calls(("call_1", "read", {"path": "notes.txt"})), reply("done")]
    runtime, store = keyed_runtime(redis, workdir, fake_openai)

    result = await runtime.run("r1", "what is in notes.txt?", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL
    (entry,) = await executed(runtime)
    receipt = Receipt.from_fields(entry.fields)
    assert receipt is not None and re.fullmatch(r"rc_[0-9a-f]{20}", receipt.id)
    assert (receipt.tool, receipt.session, receipt.approval, receipt.kid) == (
        "read",
        "r1",
        "",
        "k1",
    )
    assert receipt.args_sha256 == entry.fields["args_sha256"]
    (message,) = [m for m in await runtime.history.load("r1") if isinstance(m, ToolMessage)]
    assert "sentinel-4711" in message.content
    assert receipt.result_sha256 == text_sha256(message.content)  # over what the tool returned
    assert (await tool_span_attributes(store, result.trace_id))["receipt"] == receipt.id

    assert await cli("audit", "receipt", receipt.id) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"receipt {receipt.id}: verified\n")
    assert "  tool:          read\n" in out and "with key k1" in out
    assert "it hashes to result_sha256" in out
    assert await cli("trace", "show", str(result.trace_id)) == 0
    assert f"receipt={receipt.id}" in capsys.readouterr().out

    # A rotated ring still verifies it; one without its key does not.
    monkeypatch.setenv("CLAWGATE_AUDIT_KEY", f"{KEY},{OTHER}")
    assert await cli("audit", "receipt", receipt.id, "--json") == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    monkeypatch.setenv("CLAWGATE_AUDIT_KEY", OTHER)
    assert await cli("audit", "receipt", receipt.id) == 1
    assert "NOT verified: it was made with key id 'k1'" in capsys.readouterr().out
    monkeypatch.setenv("CLAWGATE_AUDIT_KEY", KEY)

    await rewrite(redis, entry.id, result_sha256=text_sha256("something else"))
    assert await cli("audit", "receipt", receipt.id) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"receipt {receipt.id}: NOT verified: result_sha256 was changed")
    assert await cli("audit", "receipt", receipt.id, "--json") == 1
    shown = json.loads(capsys.readouterr().out)
    assert shown["verified"] is False and shown["entry"] == entry.id

    # The history changed instead: the receipt is genuine, the history is not.
    await rewrite(redis, entry.id, result_sha256=receipt.result_sha256)
    history = Keys(PREFIX).history("r1")
    index = [m.get("role") for m in map(json.loads, await redis.lrange(history, 0, -1))]
    at = index.index("tool")
    forged = message.model_copy(update={"content": "nothing to see"}).model_dump_json()
    await redis.lset(history, at, forged)
    assert await cli("audit", "receipt", receipt.id) == 1
    assert "the history was changed after the call ran" in capsys.readouterr().out


async def test_unknown_malformed_and_unreachable(
    cli_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await cli("audit", "receipt", "rc_" + "0" * 20) == 1
    assert "NOT verified: no audit entry records it" in capsys.readouterr().out
    assert await cli("audit", "receipt", "not-a-receipt") == 2
    assert "is not a receipt id" in capsys.readouterr().err
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delenv("CLAWGATE_REDIS_CLUSTER", raising=False)
    assert await cli("audit", "receipt", "rc_" + "0" * 20) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("clawgate: cannot read the audit trail") and "\n" not in err


async def test_a_failed_call_has_no_receipt(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [calls(("call_1", "read", {"path": "missing.txt"})), reply("none")]
    runtime, store = keyed_runtime(redis, workdir, fake_openai)

    result = await runtime.run("r2", "read missing.txt", ALICE, HERE)

    (entry,) = await executed(runtime)
    assert entry.fields["status"] == "error"
    assert not {"receipt", "result_sha256", "receipt_mac"} & set(entry.fields)
    assert "receipt" not in await tool_span_attributes(store, result.trace_id)


async def test_an_approved_calls_receipt_carries_its_approval_and_shows_in_approvals_show(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (workdir / "x").write_text("x")
    fake_openai.script = [calls(("call_rm", "bash", {"command": "rm x"})), reply("removed")]
    runtime, _ = keyed_runtime(redis, workdir, fake_openai)
    first = await runtime.run("r3", "remove x", ALICE, HERE)
    assert first.stop_reason is StopReason.APPROVAL_REQUIRED and first.approval_id
    (suspended,) = await executed(runtime)  # waiting for a human: not run, no receipt
    assert suspended.fields["status"] == "suspended" and "receipt" not in suspended.fields

    decision = await runtime.decide(first.approval_id, True, ADMIN, HERE)

    assert decision.run is not None and not (workdir / "x").exists()
    (entry,) = [e for e in await executed(runtime) if e.fields["status"] == "completed"]
    receipt = Receipt.from_fields(entry.fields)
    assert receipt is not None and receipt.approval == first.approval_id
    out = io.StringIO()
    show = argparse.Namespace(verb="show", id=first.approval_id, json=False)
    assert await run_approvals_command(runtime.wing, show, out) == 0
    assert f"clawgate audit receipt {receipt.id}" in out.getvalue()
    show.json = True
    out = io.StringIO()
    assert await run_approvals_command(runtime.wing, show, out) == 0
    assert json.loads(out.getvalue())["receipt"]["approval"] == first.approval_id

    assert await cli("audit", "receipt", receipt.id) == 0
    shown = capsys.readouterr().out
    assert f"  approval:      {first.approval_id}\n" in shown
    assert "it hashes to result_sha256" in shown


async def test_a_command_that_timed_out_has_no_receipt_one_that_exited_non_zero_has(
    redis: aioredis.Redis, workdir: Path
) -> None:
    bash = BashTool(timeout=0.2, sandbox=Sandbox(SandboxMode.OFF))
    audit = AuditLog(redis, Keys(PREFIX))
    executor = ToolExecutor(ToolRegistry([bash]), audit=audit, keys=RING)
    commands = {"slow": "sleep 5", "fails": "echo no; exit 3"}
    batch = [
        ToolCall(id=k, name="bash", arguments=json.dumps({"command": v}))
        for k, v in commands.items()
    ]

    out = await executor.execute(batch, ToolContext(session="r4", workdir=workdir))

    assert [r.status.value for r in out.results] == ["completed", "completed"]
    assert "timed out" in out.results[0].model_text
    entries = {e.fields["call"]: e.fields for e in await audit.newest(10)}
    assert "receipt" not in entries["slow"]  # it did not finish what it was asked
    assert entries["fails"]["receipt"].startswith("rc_")  # it ran: its exit code is its result


async def test_a_cut_result_is_hashed_whole_and_not_compared_with_the_history(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (workdir / "big.txt").write_text("".join(f"line {i:05d} {'x' * 50}\n" for i in range(400)))
    fake_openai.script = [calls(("call_1", "read", {"path": "big.txt"})), reply("long")]
    runtime, _ = keyed_runtime(redis, workdir, fake_openai)

    await runtime.run("r5", "read big.txt", ALICE, HERE)

    (entry,) = await executed(runtime)
    receipt = Receipt.from_fields(entry.fields)
    assert receipt is not None
    (message,) = [m for m in await runtime.history.load("r5") if isinstance(m, ToolMessage)]
    assert "[output cut at 16000 of" in message.content
    kept = (workdir / output_path("r5", "call_1")).read_text()
    assert receipt.result_sha256 == text_sha256(kept)  # the whole output, not the cut one
    assert await cli("audit", "receipt", receipt.id) == 0
    assert "as cut for the model" in capsys.readouterr().out
