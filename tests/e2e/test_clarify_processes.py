"""A question to the asker survives kill -9: `clawgate serve` asks it in Slack and is killed;
the click reaches a new `clawgate serve`, which resumes the run with the answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.takeover import serve_then_worker, settled
from tests.e2e.test_slack_serve import CHANNEL, buttons
from tests.e2e.test_worker_processes import SECRET, Clawgate, wait_ready
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.fake_slack import FakeSlack, block_action_body, mention_event, next_ts, post_signed

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

ASK = {"question": "Which environment?", "options": ["staging", "prod"]}


async def test_a_question_asked_by_a_killed_process_is_answered_in_another(
    redis_url: str, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [calls(("call_q", "clarify", ASK)), reply("Deploying to staging.")]
    async with (
        FakeSlack() as fake,
        serve_then_worker(fake, redis_url, workdir, **fake_openai.settings()) as run,
    ):
        ts = next_ts()
        await run.post_to_slack(mention_event("deploy it", channel=CHANNEL, ts=ts))
        notice = await fake.await_for(
            lambda: next((c for c in fake.posts(CHANNEL, ts) if c.is_notice), None),
            30,
            what="the question",
        )
        await run.kill_serve()  # kill -9: nothing of the question lives in a process
        second = await Clawgate.start("serve", run.env, run.workdir)  # stopped below
        try:
            await second.wait_line(r"clawgate: listening on")
            await wait_ready(run.url)

            (staging, _) = buttons(notice.params["blocks"])
            click = block_action_body(
                staging["action_id"],
                staging["value"],
                message_ts=str(notice.response["ts"]),
                thread_ts=ts,
                message_blocks=notice.params["blocks"],
            )
            status, _ = await post_signed(f"{run.url}/slack/events", SECRET, click)
            assert status == 200

            def answered() -> bool:
                return any(c.params.get("text") == "Deploying to staging." for c in fake.posts())

            await settled(fake, answered, "the answer after the click")
            tool = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
            assert [m["content"] for m in tool] == ["The requester answered: staging"]
            assert len(fake_openai.requests) == 2  # the question was never asked again
            finals = [
                c
                for c in fake.posts(CHANNEL, ts)
                if c.params.get("text") == "Deploying to staging."
            ]
            assert len(finals) == 1
            updated = fake.message(CHANNEL, str(notice.response["ts"]))
            assert updated is not None and buttons(updated.blocks or []) == []
        finally:
            await second.stop()
