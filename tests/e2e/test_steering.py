"""Steering through Slack, end to end: `clawgate serve` in process (aiohttp, slack-bolt and
slack_sdk against FakeSlack, the in-process worker, a real Redis), the real `openai` client
against FakeOpenAI. While a slow tool runs, the requester's message reaches the model in the
same turn; someone else's waits for its own run; CLAWGATE_STEERING=queue keeps every message
its own run; a `/cancel` stops the run at its next step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runtime.steer import SENT_MEANWHILE
from tests.e2e.test_slack_serve import ALICE, BOB, CHANNEL, Harness, serving, session_of
from tests.fake_openai import FakeOpenAI, Step, calls, reply
from tests.fake_slack import FakeSlack, event_body, mention_event, message_event, next_ts

pytestmark = pytest.mark.e2e

ANSWER = "Deployed to staging, not prod."
SLOW_TOOL = calls(("c1", "bash", {"command": "sleep 2"}))  # the window to write in


@pytest.fixture
async def served(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> AsyncIterator[tuple[Harness, FakeOpenAI]]:
    async with serving(fake, workdir, redis_url, **fake_openai.settings()) as h:
        yield h, fake_openai


async def while_the_tool_runs(
    h: Harness, model: FakeOpenAI, script: list[Step], said: str, user: str = ALICE
) -> str:
    """Alice asks; while the model's tool call runs, `user` writes `said` in the thread.
    Returns the thread's ts."""
    model.script = script
    ts = next_ts()
    assert (await h.post(event_body(mention_event("deploy the service", ts=ts))))[0] == 200
    await h.fake.await_for(lambda: model.requests, 15, what="the model's first question")
    await asyncio.sleep(0.3)  # the model answered with the call: the tool runs now
    assert (await h.post(event_body(message_event(said, user=user, thread_ts=ts))))[0] == 200
    return ts


async def answered(h: Harness, ts: str, text: str) -> None:
    """Wait until the thread shows `text` as an answer (posted, or streamed to its end)."""
    await h.fake.await_for(lambda: text in h.texts(thread_ts=ts), 15, what=repr(text))


def users(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


async def test_the_requesters_message_reaches_the_model_in_the_same_turn(
    served: tuple[Harness, FakeOpenAI],
) -> None:
    h, model = served
    ts = await while_the_tool_runs(h, model, [SLOW_TOOL, reply(ANSWER)], "not prod!")
    await answered(h, ts, ANSWER)
    await h.drained()

    assert len(model.requests) == 2  # one run: no second one for the message
    after_the_tool = model.requests[1]["messages"]
    assert [m["role"] for m in after_the_tool[-3:]] == ["assistant", "tool", "user"]
    assert after_the_tool[-1]["content"] == SENT_MEANWHILE + "not prod!"
    assert h.texts(thread_ts=ts).count(ANSWER) == 1
    assert await h.history_length(session_of(ts)) == 5  # asked, call, result, steered, answer


async def test_someone_elses_message_waits_for_its_own_run(
    served: tuple[Harness, FakeOpenAI],
) -> None:
    h, model = served
    script = [SLOW_TOOL, reply(ANSWER), reply("Bob's answer")]
    ts = await while_the_tool_runs(h, model, script, "me too", user=BOB)
    await answered(h, ts, "Bob's answer")
    await h.drained()

    assert len(model.requests) == 3
    assert not any("me too" in said for said in users(model.requests[1]))
    bobs = users(model.requests[2])[-1]
    assert "me too" in bobs and "sent while you were working" not in bobs
    assert h.texts(thread_ts=ts).count(ANSWER) == 1


async def test_queue_mode_runs_the_requesters_message_after_the_run(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    settings = fake_openai.settings(CLAWGATE_STEERING="queue")
    async with serving(fake, workdir, redis_url, **settings) as h:
        script = [SLOW_TOOL, reply(ANSWER), reply("Noted.")]
        ts = await while_the_tool_runs(h, fake_openai, script, "not prod!")
        await answered(h, ts, "Noted.")
        await h.drained()

    assert len(fake_openai.requests) == 3
    assert not any("not prod!" in said for said in users(fake_openai.requests[1]))
    assert users(fake_openai.requests[2])[-1].endswith("not prod!")  # its own run, as before


async def test_cancel_sent_while_a_tool_runs_stops_the_run_at_its_next_step(
    served: tuple[Harness, FakeOpenAI],
) -> None:
    h, model = served
    ts = await while_the_tool_runs(h, model, [SLOW_TOOL, reply(ANSWER)], "/cancel")
    told = await h.fake.await_for(
        lambda: h.fake.ephemerals(CHANNEL, ALICE), 15, what="the answer to /cancel"
    )
    await h.drained()

    assert told[0].params["text"] == "The running request stopped at its next step."
    assert len(model.requests) == 1  # not asked again after the tool
    assert ANSWER not in h.texts(thread_ts=ts)
