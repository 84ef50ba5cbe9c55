"""The console's Grants and Audit pages in a real browser against the whole service: an
approver approves always in the inbox, the grant is listed, another approver (neither its
granter nor an admin) may not revoke it (refused, audited), its granter revokes it and it is
gone, audited as in the chat; a decision shows in the audit trail with who made it, a search
by event finds it, and someone who oversees nothing of that conversation sees none of it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import ALICE, APPROVER, CHANNEL, serving
from tests.browser.screenshots import save_screenshot
from tests.browser.test_console_inbox import pending_approval, sign_in_link

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.async_api import Browser, Page

    from tests.browser.harness import Harness

pytestmark = pytest.mark.e2e

DAVE = "U_DAVE"  # an approver too, but not the grant's granter and no admin
CONVERSATION = re.compile(rf"slack:\w+:{CHANNEL}")


async def _signed_in(served: Harness, page: Page, user: str) -> None:
    await page.goto(await sign_in_link(served, user))
    await page.wait_for_url(re.compile(r"/console/$"))


async def _events(served: Harness) -> list[tuple[str, str]]:
    return [(e.event, e.actor) async for e in served.service.runtime.audit.since(0)]


async def test_a_grant_approved_always_is_listed_revoked_by_its_granter_and_no_one_else(
    redis_url: str, workdir: Path, browser: Browser, page: Page
) -> None:
    approvers = f"slack:{APPROVER},slack:{DAVE}"
    async with serving(redis_url, workdir, CLAWGATE_APPROVERS=approvers) as served:
        _, approval_id = await pending_approval(served, "rm old.txt")
        await _signed_in(served, page, APPROVER)
        item = page.locator(f'[data-approval-id="{approval_id}"]')
        await item.locator('button[name="decision"][value="approve_always"]').click()
        await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))

        await page.goto(served.url("/console/grants"))
        (grant,) = await served.service.runtime.approvals.grants.all()
        row = page.locator(f'[data-grant-id="{grant.id}"]')
        text = await row.inner_text()
        assert "bash rm" in text and f"slack:{APPROVER}" in text and "until revoked" in text
        assert CONVERSATION.search(text)
        await save_screenshot(page, "grants")

        # Dave oversees the conversation, so he sees it, but no button, and a POST is refused.
        context = await browser.new_context()
        dave = await context.new_page()
        await _signed_in(served, dave, DAVE)
        await dave.goto(served.url("/console/grants"))
        assert await dave.locator(f'[data-grant-id="{grant.id}"]').count() == 1
        assert await dave.locator("[data-grant-id] button").count() == 0
        csrf = await dave.locator('input[name="csrf"]').first.get_attribute("value")
        url = served.url(f"/console/grants/{grant.id}/revoke")
        refused = await dave.request.post(url, form={"csrf": csrf or ""})
        assert refused.status == 403 and "only admins where it applies" in await refused.text()
        await context.close()
        assert ("grant_revoke_refused", f"slack:{DAVE}") in await _events(served)
        assert await served.service.runtime.approvals.grants.all() == [grant]

        await row.get_by_role("button", name=f"Revoke grant {grant.id}").click()
        await page.wait_for_url(re.compile(r"/console/grants$"))
        assert await page.locator("[data-grant-id]").count() == 0
        assert await served.service.runtime.approvals.grants.all() == []
        assert ("grant_revoked", f"slack:{APPROVER}") in await _events(served)


async def test_the_audit_page_shows_a_decision_to_who_oversees_it_and_not_to_the_requester(
    served: Harness, browser: Browser, page: Page
) -> None:
    _, approval_id = await pending_approval(served, "rm -rf nothing-here")
    await _signed_in(served, page, APPROVER)
    item = page.locator(f'[data-approval-id="{approval_id}"]')
    await item.locator('button[name="decision"][value="reject"]').first.click()
    await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))

    await page.goto(served.url("/console/audit"))
    decided = page.locator('tr[data-event="approval_decided"]')
    assert await decided.count() == 1
    text = await decided.inner_text()
    assert f"slack:{APPROVER}" in text and approval_id in text and "rejected" in text
    assert await page.locator('tr[data-event="approval_requested"]').count() >= 1
    chain = await page.inner_text("p.chain")
    assert re.fullmatch(r"Chain: the \d+ chained entries shown verify \(unkeyed: .*\)\.", chain)
    await save_screenshot(page, "audit")

    await page.fill('input[name="event"]', "approval_decided")
    await page.fill('input[name="since"]', "1h")
    await page.locator('form.search button[type="submit"]').click()
    await page.wait_for_url(re.compile(r"event=approval_decided"))
    events = await page.locator("tr[data-event]").evaluate_all(
        "rows => rows.map(r => r.dataset.event)"
    )
    assert events == ["approval_decided"]
    await page.goto(served.url("/console/audit?since=yesterday"))
    assert "Not searched: since:" in await page.inner_text("main")

    # The requester oversees nothing here: not one entry of the conversation, nor any other.
    context = await browser.new_context()
    alice = await context.new_page()
    await _signed_in(served, alice, ALICE)
    await alice.goto(served.url("/console/audit"))
    assert await alice.locator("tr[data-event]").count() == 0
    assert CONVERSATION.search(await alice.inner_text("main")) is None
    await context.close()
