"""The policy page in a real browser: an admin picks the Slack channel's conversation, sees
each tool's state and where it comes from, denies `bash` there (the Redis layer, audited);
an unknown tool is refused with the validation message. An admin of one conversation (the
policy file's) reaches it and nothing wider. An approver who is no admin sees neither the
page nor a way to change it, and a forged change with her own form token is refused by reach
and audited."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import aiohttp
import pytest

from tests.browser.harness import ADMIN, ALICE, APPROVER, CHANNEL, Harness, serving
from tests.browser.screenshots import save_screenshot
from tests.browser.test_console_inbox import sign_in_link
from tests.fake_slack import TEAM_ID

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.async_api import Page

    from runtime.audit import AuditEntry

pytestmark = pytest.mark.e2e

CHAT = f"slack:{TEAM_ID}:{CHANNEL}"


async def _audited(served: Harness, event: str) -> list[AuditEntry]:
    return [e async for e in served.service.runtime.audit.since(0) if e.event == event]


async def test_an_admin_denies_bash_in_the_channel_and_the_page_shows_it_from_redis(
    served: Harness, page: Page
) -> None:
    await page.goto(await sign_in_link(served, ADMIN))
    await page.wait_for_url(re.compile(r"/console/$"))
    await page.click('nav a[href="/console/policy"]')
    await page.wait_for_url(re.compile(r"/console/policy$"))
    assert "Policy of global" in await page.inner_text("h1")

    await page.fill('input[name="scope"]', CHAT)
    await page.click('form.search button:has-text("Show")')
    await page.wait_for_url(re.compile(r"/console/policy\?scope=slack%3AT111%3AC111$"))
    bash = page.locator('table.policy-tools tr[data-tool="bash"]')
    assert await bash.get_attribute("data-state") == "allow"
    assert await bash.locator(".layer").inner_text() == "settings and defaults"
    rules = await page.inner_text("table.policy-rules")
    assert f"slack:{ADMIN}" in rules and "CLAWGATE_ADMINS" in rules
    assert f"slack:{APPROVER}" in rules and "CLAWGATE_APPROVERS" in rules

    await bash.locator('button[name="state"][value="deny"]').click()
    await page.wait_for_url(re.compile(r"/console/policy/change$"))
    result = await page.inner_text(".result")
    # What the POST answered is not fetched again on a change (its address takes no GET).
    assert await page.get_attribute("main#live", "data-still") is not None
    assert result.startswith(f"bash in {CHAT}: now denied (override [{CHAT}] by slack:{ADMIN}")
    assert result.endswith("was allowed (default: CLAWGATE_ENABLED_TOOLS).")
    bash = page.locator('table.policy-tools tr[data-tool="bash"]')
    assert await bash.get_attribute("data-state") == "deny"
    assert await bash.locator(".layer").inner_text() == "Redis override"
    override = page.locator(f'table.policy-overrides tr[data-scope="{CHAT}"][data-tool="bash"]')
    assert f"slack:{ADMIN}" in await override.inner_text()
    await save_screenshot(page, "policy")

    policy = await served.service.runtime.policies.effective(CHAT)
    assert policy.verdict("bash").state == "deny"
    [changed] = await _audited(served, "policy_changed")
    assert changed.actor == f"slack:{ADMIN}"
    assert (changed.fields["scope"], changed.fields["tool"]) == (CHAT, "bash")
    assert (changed.fields["old"], changed.fields["new"]) == ("none", "deny")

    # A tool that does not exist: the validation's message, nothing stored, the refusal audited.
    await page.fill('form.policy-other input[name="tool"]', "<b>nosuch</b>")
    await page.select_option('form.policy-other select[name="state"]', "allow")
    async with page.expect_response(re.compile(r"/console/policy/change$")) as answer:
        await page.click('form.policy-other button[type="submit"]')
    assert (await answer.value).status == 400
    refusal = await page.inner_text(".result")
    assert refusal.startswith("Policy not changed: unknown tool '<b>nosuch</b>'; tools: ")
    assert await page.locator(".result b").count() == 0  # shown as text, never markup
    [refused] = await _audited(served, "policy_refused")
    assert (refused.actor, refused.fields["tool"]) == (f"slack:{ADMIN}", "<b>nosuch</b>")
    assert len(await _audited(served, "policy_changed")) == 1


async def test_an_approver_who_is_no_admin_gets_403_and_a_forged_change_is_refused_by_reach(
    served: Harness, page: Page
) -> None:
    await page.goto(await sign_in_link(served, APPROVER))
    await page.wait_for_url(re.compile(r"/console/$"))
    assert await page.locator('nav a[href="/console/policy"]').count() == 0
    csrf = await page.locator('input[name="csrf"]').first.get_attribute("value")
    assert csrf

    for path in ("/console/policy", f"/console/policy?scope={CHAT}"):
        response = await page.goto(served.url(path))
        assert response is not None and response.status == 403
        assert f"slack:{APPROVER} is not one" in await page.inner_text("main")
        assert await page.locator("table").count() == 0

    # Her own session and her own form token: the middleware lets it through, reach does not.
    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    form = {"csrf": csrf, "scope": CHAT, "tool": "bash", "state": "allow"}
    async with (
        aiohttp.ClientSession(cookies=cookies) as http,
        http.post(served.url("/console/policy/change"), data=form) as forged,
    ):
        assert forged.status == 403
        text = await forged.text()
    assert f"only admins may change the policy of {CHAT}" in text
    assert "policy-tools" not in text
    [refused] = await _audited(served, "policy_refused")
    assert (refused.actor, refused.fields["scope"]) == (f"slack:{APPROVER}", CHAT)
    assert "only admins may change" in refused.fields["why"]
    assert await _audited(served, "policy_changed") == []
    assert (await served.service.runtime.policies.overrides(CHAT)) == {}


async def test_an_admin_of_one_conversation_reaches_it_and_nothing_wider(
    redis_url: str, workdir: Path, tmp_path: Path, page: Page
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[conversations."{CHAT}".approvals]\nadmins = ["slack:{ALICE}"]\n')
    async with serving(redis_url, workdir, CLAWGATE_POLICY_FILE=str(policy)) as served:
        await page.goto(await sign_in_link(served, ALICE))
        await page.wait_for_url(re.compile(r"/console/$"))
        response = await page.goto(served.url("/console/policy"))  # lands on her scope
        assert response is not None and response.status == 200
        assert await page.inner_text("h1") == f"Policy of {CHAT}"
        assert await page.locator(".scopes a").all_inner_texts() == [CHAT]
        rules = await page.inner_text("table.policy-rules")
        assert f"slack:{ADMIN}, slack:{ALICE}" in rules
        assert f"CLAWGATE_ADMINS + policy file [{CHAT}]" in rules

        write = page.locator('table.policy-tools tr[data-tool="write"]')
        await write.locator('button[name="state"][value="deny"]').click()
        await page.wait_for_url(re.compile(r"/console/policy/change$"))
        row = page.locator(f'table.policy-overrides tr[data-scope="{CHAT}"][data-tool="write"]')
        assert await row.locator(".reach").inner_text() == f"admins of {CHAT} or a wider scope"

        for wider in ("", "slack:T111", "slack"):
            response = await page.goto(served.url(f"/console/policy?scope={wider}"))
            assert response is not None and response.status == 403
