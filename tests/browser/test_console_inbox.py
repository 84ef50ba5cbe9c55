"""The web console's main path, in a real browser against the whole service: an approver
asks for a sign-in link in Slack, signs in, finds the request from a Slack thread in the inbox,
approves it; the call runs once, the thread gets the answer and the notice its update, and an
open inbox updates by itself. Someone who may not decide sees nothing to decide, and a
forged decision is refused and audited; a link works once."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import aiohttp
import pytest

from tests.browser.harness import ALICE, APPROVER, CHANNEL, Harness
from tests.browser.screenshots import save_screenshot

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = pytest.mark.e2e

LINK = re.compile(r"https?://\S+/console/login\?token=[\w.-]+")


async def sign_in_link(served: Harness, user: str) -> str:
    """`user` types /clawgate console in the channel; the bot answers them alone."""
    await served.post_slack_message("/clawgate console", user=user)
    told = await served.await_posted(
        lambda call: call.params.get("user") == user and "/console/login" in str(call.params),
        f"a sign-in link for {user}",
        "chat.postEphemeral",
    )
    found = LINK.search(str(told.params.get("text")))
    assert found is not None, told.params
    return found.group(0)


async def pending_approval(served: Harness, command: str) -> tuple[str, str]:
    """ALICE asks for `command` in a new thread; returns the thread and the approval id."""
    before = {n.approval_id for n in await served.service.runtime.wing.pending()}
    thread = await served.post_slack_message(f"run: {command}", user=ALICE)
    await served.await_posted(
        lambda call: "blocks" in call.params and "approve" in str(call.params["blocks"]),
        "the approval notice",
        "chat.postMessage",
        thread_ts=thread,
    )
    new = {n.approval_id for n in await served.service.runtime.wing.pending()} - before
    assert len(new) == 1, f"expected one new approval, got {new}"
    return thread, new.pop()


async def test_an_approver_signs_in_from_slack_approves_in_the_inbox_and_the_thread_is_answered(
    served: Harness, page: Page
) -> None:
    target = served.workdir / "build"
    target.mkdir()
    (target / "old.txt").write_text("x")
    thread, approval_id = await pending_approval(served, "rm -rf build")

    link = await sign_in_link(served, APPROVER)
    await page.goto(link)
    await page.wait_for_url(re.compile(r"/console/$"))
    item = page.locator(f'[data-approval-id="{approval_id}"]')
    await item.wait_for()
    assert "rm -rf build" in await item.inner_text()
    await save_screenshot(page, "inbox")

    # A second tab on the inbox watches it change by itself.
    watcher = await page.context.new_page()
    await watcher.goto(served.url("/console/"))
    await watcher.wait_for_selector("body[data-live-open]")
    await watcher.locator(f'[data-approval-id="{approval_id}"]').wait_for()

    await item.locator('button[name="decision"][value="approve"]').first.click()
    await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))

    answer = await served.await_posted(
        lambda call: call.method == "chat.postMessage" and "exit code 0" in str(call.params),
        "the answer in the thread",
        thread_ts=thread,
    )
    assert answer.params["channel"] == CHANNEL
    await served.await_posted(
        lambda call: call.method == "chat.update" and "Approved" in str(call.params),
        "the notice updated",
        thread_ts=thread,
    )
    assert not target.exists()  # the call ran
    await watcher.locator(f'[data-approval-id="{approval_id}"]').wait_for(state="detached")
    await page.reload()
    assert "consumed" in await page.inner_text(".status")
    await save_screenshot(page, "approval")
    audit = served.service.runtime.audit
    ran = [e async for e in audit.since(0) if e.event == "tool_executed"]
    assert [e.fields["status"] for e in ran] == ["suspended", "completed"]  # asked, ran once


async def test_who_may_not_decide_sees_nothing_and_a_forged_decision_is_refused_and_audited(
    served: Harness, page: Page
) -> None:
    _, approval_id = await pending_approval(served, "rm -rf nothing-here")
    link = await sign_in_link(served, ALICE)  # the requester: requesters may not approve
    await page.goto(link)
    await page.wait_for_url(re.compile(r"/console/$"))
    assert await page.locator("[data-approval-id]").count() == 0
    assert await page.locator('button[name="decision"]').count() == 0
    response = await page.goto(served.url(f"/console/approvals/{approval_id}"))
    assert response is not None and response.status == 404

    # Her own session, posting without the form token; then with her token but deciding.
    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    url = served.url(f"/console/approvals/{approval_id}/decide")
    async with (
        aiohttp.ClientSession(cookies=cookies) as http,
        http.post(url, data={"decision": "approve"}) as forged,
    ):
        assert forged.status == 403
    refused = [e async for e in served.service.runtime.audit.since(0)]
    assert any(e.event == "console_refused" and e.actor == f"slack:{ALICE}" for e in refused)
    loaded = await served.service.runtime.wing.load(approval_id)
    assert loaded is not None and loaded[0].status.value == "pending"

    # A used link does not work again.
    again = await page.goto(link)
    assert again is not None and again.status == 403
