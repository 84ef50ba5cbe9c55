"""Structured logs (issue 32): a line logged while a worker handles a job carries the job's
context as JSON fields (session, conversation, trace, job, worker; approval in a decision),
text lines get a timestamp and the context as a suffix, and concurrent runs never see each
other's context."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.logs import make_handler
from runtime import log_context
from runtime.models import RunResult
from runtime.providers.demo import DemoProvider
from runtime.queue.inbox import Inbox, Job
from runtime.queue.worker import Worker
from runtime.store.keys import Keys
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore
from tests.component.test_tracing import openai
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_runtime

ISO_MS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """JSON and text lines of every clawgate logger at INFO and above."""
    as_json, as_text = io.StringIO(), io.StringIO()
    handlers = [make_handler("json", as_json), make_handler("text", as_text)]
    loggers = [logging.getLogger(name) for name in ("runtime", "clawgate.test")]
    saved = [(lg.level, lg.handlers[:]) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
        lg.handlers.extend(handlers)
    try:
        yield as_json, as_text
    finally:
        for lg, (level, kept) in zip(loggers, saved, strict=True):
            lg.setLevel(level)
            lg.handlers[:] = kept


def entries(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_a_line_logged_in_a_worker_job_carries_its_context_as_fields(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    captured: tuple[io.StringIO, io.StringIO],
) -> None:
    (workdir / "notes.txt").write_text("notes")
    fake_openai.script = [calls(("c1", "read", {"path": "notes.txt"})), reply("read it")]
    tracer = Tracer("metadata", TraceStore(redis, Keys(PREFIX), 3600))
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai), tracer=tracer)
    inbox = Inbox(redis, Keys(f"logs-{uuid.uuid4().hex[:8]}"), partitions=1)
    ran: asyncio.Queue[tuple[str, RunResult]] = asyncio.Queue()

    async def handle(job: Job) -> None:
        result = await runtime.run("log-s1", "read the notes", ALICE, HERE, job.id)
        await ran.put((job.id, result))

    worker = Worker(inbox, handle, "worker-a")
    await worker.start()
    try:
        await inbox.put("log-s1", "{}", [])
        job_id, result = await asyncio.wait_for(ran.get(), 10)
    finally:
        await worker.stop(grace=1)

    as_json, as_text = captured
    (line,) = [e for e in entries(as_json) if e["message"] == "session log-s1: read completed"]
    assert result.trace_id is not None
    assert {k: line.get(k) for k in ("session", "conversation", "trace", "job", "worker")} == {
        "session": "log-s1",
        "conversation": HERE.id,
        "trace": result.trace_id,
        "job": job_id,
        "worker": "worker-a",
    }
    assert "approval" not in line  # not set: absent
    (text,) = [t for t in as_text.getvalue().splitlines() if "log-s1: read completed" in t]
    assert re.match(rf"{ISO_MS} INFO runtime.executor: session log-s1: read completed  ", text)
    assert text.endswith(
        f"session=log-s1 conversation={HERE.id} trace={result.trace_id} job={job_id} "
        "worker=worker-a"
    )


async def test_a_decision_logs_its_approval(
    redis: aioredis.Redis, workdir: Path, captured: tuple[io.StringIO, io.StringIO]
) -> None:
    (workdir / "victim.txt").write_text("v")
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    asked = await runtime.run("log-s2", "run: rm victim.txt", ALICE, HERE)
    assert asked.approval_id is not None

    await runtime.decide(asked.approval_id, True, ADMIN, HERE)

    as_json, _ = captured
    ran = [e for e in entries(as_json) if e["message"] == "session log-s2: bash completed"]
    assert [(e["approval"], e["session"]) for e in ran] == [(asked.approval_id, "log-s2")]


def test_outside_any_context_lines_carry_none_and_text_has_a_timestamp(
    captured: tuple[io.StringIO, io.StringIO],
) -> None:
    logging.getLogger("clawgate.test.ctx").info("plain line token=hunter2")
    as_json, as_text = captured
    (line,) = entries(as_json)
    assert set(line) == {"ts", "level", "logger", "message"}
    assert line["message"] == "plain line token=[redacted]"
    assert re.fullmatch(
        rf"{ISO_MS} INFO clawgate.test.ctx: plain line token=\[redacted\]\n", as_text.getvalue()
    )


async def test_context_does_not_leak_between_two_concurrent_runs(
    captured: tuple[io.StringIO, io.StringIO],
) -> None:
    tracer = Tracer("metadata")  # traced, stored nowhere
    log = logging.getLogger("clawgate.test.ctx")
    both_in = asyncio.Barrier(2)
    seen: dict[str, str] = {}

    async def run(session: str, job: str) -> None:
        with log_context.bound(job=job):
            async with tracer.trace("agent.run", session=session, conversation=f"c-{session}") as t:
                assert t.trace is not None
                seen[session] = t.trace.trace_id
                await both_in.wait()  # the other run is inside its own context now
                log.info("working")
                await asyncio.sleep(0)
        log.info("after")  # back outside: nothing of the run is left

    await asyncio.gather(run("s-a", "job-a"), run("s-b", "job-b"))

    as_json, _ = captured
    working = {e["session"]: e for e in entries(as_json) if e["message"] == "working"}
    assert set(working) == {"s-a", "s-b"}
    for session, job in (("s-a", "job-a"), ("s-b", "job-b")):
        line = working[session]
        assert (line["conversation"], line["trace"], line["job"]) == (
            f"c-{session}",
            seen[session],
            job,
        )
    after = [e for e in entries(as_json) if e["message"] == "after"]
    assert len(after) == 2 and all("session" not in e and "trace" not in e for e in after)
    assert log_context.current() == {}
