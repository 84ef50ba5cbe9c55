"""Who sees and may decide what in the web console (runtime/approval/desk.py): exactly whom
the chat lets decide. Real Redis, real runs suspended by the demo model."""

from __future__ import annotations

from pathlib import Path

import redis.asyncio as aioredis

from runtime.approval.desk import ApprovalDesk
from runtime.models import Actor, ConversationRef
from runtime.providers.demo import DemoProvider
from tests.support import ADMIN, make_runtime

ALICE = Actor(platform="slack", user_id="UALICE")  # asks
CAROL = Actor(platform="slack", user_id="UCAROL")  # an approver everywhere
DAVE = Actor(platform="slack", user_id="UDAVE")  # no one here
CHANNEL = ConversationRef(platform="slack", id="slack:T1:C1")
DM = ConversationRef(platform="slack", id="slack:T1:D1", direct=True)


async def test_each_person_sees_what_the_chat_lets_them_decide(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider(), approvers=(CAROL.key,))
    desk = ApprovalDesk(runtime.wing, runtime.policies)
    channel = await runtime.run("slack:T1:C1:1.1", "run: rm a.txt", ALICE, CHANNEL)
    direct = await runtime.run("slack:T1:D1", "run: rm b.txt", ALICE, DM)
    assert channel.approval_id and direct.approval_id

    async def seen(actor: Actor) -> set[str]:
        return {item.record.id for item in await desk.open_items(actor)}

    assert await seen(ADMIN) == {channel.approval_id, direct.approval_id}
    # The approver decides the channel's request, not someone's direct messages (in the chat
    # she could not decide there either).
    assert await seen(CAROL) == {channel.approval_id}
    assert isinstance(await desk.item(CAROL, direct.approval_id), str)
    # Requesters may not approve their own calls here; strangers see nothing; an unknown id
    # reads the same as one they may not see.
    assert await seen(ALICE) == set()
    assert await seen(DAVE) == set()
    unknown, hidden = await desk.item(DAVE, "nosuchid"), await desk.item(DAVE, channel.approval_id)
    assert isinstance(unknown, str) and isinstance(hidden, str)
    assert unknown.replace("nosuchid", "X") == hidden.replace(channel.approval_id, "X")
    assert desk.is_global_admin(ADMIN) and not desk.is_global_admin(CAROL)
    oversight = desk.oversight(CAROL)
    assert await oversight.oversees(CHANNEL.id)
    assert not await desk.oversight(DAVE).oversees(CHANNEL.id)
