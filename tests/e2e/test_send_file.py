"""send_file end to end: the model (the real `openai` client against FakeOpenAI) asks to post a
work-dir file; the real server, slack_sdk / lark-oapi against the fakes, a real Redis. What a
user would notice: the file in the thread with its bytes, refusals told to the model with
nothing uploaded, an approval asked first when the policy says so, the file's sha256 in the
audit trail, and a worker killed mid-upload posting the file once after the retake."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.inbound import APPROVE_ONCE
from runtime.audit import AuditEntry, AuditLog
from runtime.store.keys import Keys
from tests.e2e import test_feishu_serve as feishu
from tests.e2e.takeover import serve_then_worker, settled
from tests.e2e.test_slack_serve import (
    ALICE,
    APPROVER,
    CHANNEL,
    Harness,
    click,
    request_risky,
    serving,
)
from tests.fake_feishu import FakeFeishu
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.fake_slack import FakeSlack, event_body, mention_event, next_ts
from tests.processes import chat, clean_env

pytestmark = pytest.mark.e2e  # real servers and processes: the slow tier

REPORT = b"build 41: 3 failed, 118 passed\nfailing: test_region, test_deploy, test_config\n"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(40)
ENV = "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD\n"


def told(fake_openai: FakeOpenAI, request: int = 1) -> dict[str, str]:
    """What the model was told of each call (tool message by call id) in a later request."""
    messages = fake_openai.requests[request]["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


async def audited(redis: Any, prefix: str, tool: str = "send_file") -> list[AuditEntry]:
    entries = await AuditLog(redis, Keys(prefix)).newest(100)
    return [e for e in entries if e.event == "tool_executed" and e.fields.get("tool") == tool]


async def mention(h: Harness, text: str) -> str:
    ts = next_ts()
    status, _ = await h.post(event_body(mention_event(text, user=ALICE, ts=ts)))
    assert status == 200
    return ts


# ---------------------------------------------------------------------------------------------
# Slack
# ---------------------------------------------------------------------------------------------


async def test_slack_a_work_dir_file_arrives_in_the_thread_and_its_hash_is_audited(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    (workdir / "out").mkdir()
    (workdir / "out" / "report.txt").write_bytes(REPORT)
    fake_openai.script = [
        calls(("c1", "send_file", {"path": "out/report.txt", "title": "Build 41 report"})),
        reply("Posted the report."),
    ]
    async with serving(fake, workdir, redis_url, **fake_openai.settings()) as h:
        ts = await mention(h, "send me the build report")
        await h.await_said("Posted the report.")
        await h.drained()
        (shared,) = fake.files(CHANNEL, ts)
        assert (shared.name, shared.title, shared.data) == ("report.txt", "Build 41 report", REPORT)
        digest = hashlib.sha256(REPORT).hexdigest()
        assert told(fake_openai)["c1"] == (
            f"posted out/report.txt ({len(REPORT)} bytes, sha256 {digest}) to the conversation "
            "as 'Build 41 report'"
        )
        (entry,) = await audited(h.redis, h.prefix)
        assert entry.fields["status"] == "completed" and entry.fields["file_sha256"] == digest
        assert entry.fields["file_bytes"] == str(len(REPORT))
        offered = {t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
        assert "send_file" in offered  # on by default


async def test_slack_an_env_file_and_paths_outside_are_refused_and_nothing_uploaded(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    (workdir / ".env").write_text(ENV)
    (workdir / "config.txt").write_text("region = eu\n")
    os.link(workdir / "config.txt", workdir / "config-copy.txt")  # another name of one file
    (workdir.parent / "outside.txt").write_text("not in the work dir\n")
    (workdir / "link.txt").symlink_to(workdir.parent / "outside.txt")
    (workdir / "keys.txt").write_text(ENV)  # not a secret by name: by what it holds
    refused = {
        "c1": ".env",
        "c2": "../outside.txt",
        "c3": str(workdir.parent / "outside.txt"),
        "c4": "link.txt",
        "c5": "config-copy.txt",
    }
    fake_openai.script = [
        calls(*((i, "send_file", {"path": p}) for i, p in refused.items())),
        reply("I could not post those."),
    ]
    async with serving(fake, workdir, redis_url, **fake_openai.settings()) as h:
        await mention(h, "send me the env and the outside file")
        await h.fake.await_for(
            lambda: any("could not post" in text for text in h.texts()), 15, what="the answer"
        )
        await h.drained()
        said = told(fake_openai)
        assert said["c1"].startswith("refused by the risk policy: posts a secret"), said
        assert "'..'" in said["c2"], said
        assert "is outside the work directory" in said["c3"], said
        assert "leaves the work directory through a symlink" in said["c4"], said
        assert "has 2 hard links" in said["c5"], said
        assert fake.calls("files.getUploadURLExternal") == [] and fake.files() == []
        statuses = {e.fields["call"]: e.fields["status"] for e in await audited(h.redis, h.prefix)}
        assert statuses == {"c1": "denied", "c2": "error", "c3": "error", "c4": "error"} | {
            "c5": "error"
        }
        assert ENV.strip() not in json.dumps(fake_openai.requests[1])  # nothing read out either

        # A file whose text looks like a secret asks first: nothing is posted meanwhile.
        fake_openai.script = [calls(("c6", "send_file", {"path": "keys.txt"}))]
        pending = await request_risky(h, "send keys.txt", user=ALICE)
        await h.drained()
        assert "looks like a secret" in str(pending.notice.params.get("text")) + json.dumps(
            pending.notice.params.get("blocks")
        )
        assert fake.files() == []


async def test_slack_a_policy_that_asks_for_send_file_posts_only_after_approve(
    fake: FakeSlack, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    policy = workdir.parent / "ask.toml"
    policy.write_text('[tools]\nask = ["send_file"]\n')
    (workdir / "report.txt").write_bytes(REPORT)
    fake_openai.script = [
        calls(("c1", "send_file", {"path": "report.txt"})),
        reply("Posted it once approved."),
    ]
    settings = fake_openai.settings(CLAWGATE_POLICY_FILE=str(policy))
    async with serving(fake, workdir, redis_url, **settings) as h:
        pending = await request_risky(h, "send me report.txt", user=ALICE)
        await h.drained()
        assert fake.files() == [] and fake.calls("files.getUploadURLExternal") == []
        assert "report.txt" in json.dumps(pending.notice.params.get("blocks"))

        assert (await click(h, pending, APPROVE_ONCE, APPROVER))[0] == 200
        await h.await_said("Posted it once approved.")
        await h.drained()
        (shared,) = fake.files(CHANNEL, pending.thread_ts)
        assert shared.data == REPORT and shared.title == "report.txt"
        suspended, entry = await audited(h.redis, h.prefix)  # asked, then ran once approved
        assert suspended.fields["status"] == "suspended" and "file_sha256" not in suspended.fields
        assert entry.fields["status"] == "completed"
        assert entry.fields["approval"] == pending.approval_id
        assert entry.fields["file_sha256"] == hashlib.sha256(REPORT).hexdigest()


# ---------------------------------------------------------------------------------------------
# Feishu
# ---------------------------------------------------------------------------------------------


async def test_feishu_a_work_dir_file_arrives_as_a_file_message_and_secrets_are_refused(
    fake_feishu: FakeFeishu, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    (workdir / "report.txt").write_bytes(REPORT)
    (workdir / "chart.png").write_bytes(PNG)
    (workdir / ".env").write_text(ENV)
    fake_openai.script = [
        calls(
            ("c1", "send_file", {"path": "report.txt", "title": "Build 41"}),
            ("c2", "send_file", {"path": ".env"}),
            ("c3", "send_file", {"path": "chart.png"}),
        ),
        reply("Posted the report."),
    ]
    fake = fake_feishu
    async with feishu.serving(fake, workdir, redis_url, **fake_openai.settings()) as h:
        said = await h.say("send me the report and the env")

        def answered() -> bool:  # in a card or as text: the Markdown rendering is not ours
            return any("Posted the report." in str(m.text) for m in fake.messages())

        await fake.await_for(answered, 15, what="the answer")
        await h.drained()
        upload, image = fake.uploads()
        assert (upload.kind, upload.name, upload.data) == ("file", "report.txt", REPORT)
        assert (image.kind, image.data) == ("image", PNG)  # an image is shown inline
        posted = {m.msg_type: m for m in fake.messages(root_id=said.message_id)}
        assert posted["file"].content == {"file_key": upload.key}
        assert posted["image"].content == {"image_key": image.key}
        said_to_model = told(fake_openai)
        assert said_to_model["c1"].startswith("posted report.txt")
        assert said_to_model["c2"].startswith("refused by the risk policy: posts a secret")
        assert said_to_model["c3"].startswith("posted chart.png")
        entries = {e.fields["call"]: e for e in await audited(h.redis, h.prefix)}
        assert entries["c1"].fields["file_sha256"] == hashlib.sha256(REPORT).hexdigest()
        assert entries["c3"].fields["file_sha256"] == hashlib.sha256(PNG).hexdigest()


# ---------------------------------------------------------------------------------------------
# The terminal
# ---------------------------------------------------------------------------------------------


async def test_the_terminal_says_where_the_file_is_and_refuses_a_secret(workdir: Path) -> None:
    (workdir / "report.txt").write_bytes(REPORT)
    (workdir / ".env").write_text(ENV)
    typed = (
        'call send_file {"path": "report.txt", "title": "Build 41"}\n'
        'call send_file {"path": ".env"}\n'
    )
    code, out, _ = await chat(typed, workdir, clean_env(), "chat")
    assert code == 0
    assert f"[file] Build 41: report.txt in the work dir ({len(REPORT)} B)" in out
    assert "send_file denied: refused by the risk policy: posts a secret" in out
    assert "sk-proj" not in out


# ---------------------------------------------------------------------------------------------
# Retakes: a worker killed mid-upload
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["uploading", "shared"])
async def test_a_worker_killed_mid_upload_posts_the_file_once_after_the_retake(
    redis_url: str, workdir: Path, fake_openai: FakeOpenAI, when: str
) -> None:
    """kill -9 of `clawgate serve` while slack_sdk uploads the file (the fake's upload URL is
    slow), or once Slack shared it but before its answer came: a `clawgate worker` takes the
    job over and runs the keyed call again, which uploads anew or finds the file in the
    thread; one file in the thread, one answer."""
    data = b"".join(b"row %06d\n" % n for n in range(20_000))
    (workdir / "table.csv").write_bytes(data)
    fake_openai.script = [
        calls(("c1", "send_file", {"path": "table.csv"})),
        reply("Here is the table."),
    ]
    async with FakeSlack() as fake:
        if when == "uploading":
            fake.upload_delay = 30.0
        else:
            fake.slow_answers["files.completeUploadExternal"] = 30.0
        async with serve_then_worker(fake, redis_url, workdir, **fake_openai.settings()) as run:
            event = mention_event("send me the table", channel=CHANNEL)
            await run.post_to_slack(event)
            if when == "uploading":
                await fake.await_for(lambda: fake.uploading > 0, 30, what="the upload under way")
            else:
                await fake.await_for(fake.files, 30, what="the file shared")
            await run.kill_serve()
            fake.upload_delay, fake.slow_answers = 0.0, {}
            await run.start_worker()

            def answers() -> list[str]:
                said = fake.said(CHANNEL, event["ts"])
                return [t for t in said if t == "Here is the table."]

            await settled(fake, answers, "the answer after the takeover")
            assert len(answers()) == 1, fake.describe()
            (shared,) = fake.files(CHANNEL, event["ts"])
            assert shared.data == data and shared.name == "table.csv"
            # Uploading, the first upload was never shared; shared, it was found in the thread.
            uploads = len(fake.calls("files.getUploadURLExternal"))
            assert uploads == (2 if when == "uploading" else 1), fake.describe()
