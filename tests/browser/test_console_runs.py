"""The console's Runs pages in a real browser: a run from a Slack thread pauses for approval,
an approver approves it in the inbox; the runs page lists the paused run with the decision and
the run that resumed it, and the run's page draws its decision tree with the resumed run
beneath the pause. The requester, who oversees nothing, sees no run and gets a 404."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import ALICE, APPROVER, CHANNEL, Harness, serving
from tests.browser.screenshots import save_screenshot
from tests.browser.test_console_inbox import pending_approval, sign_in_link

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

pytestmark = pytest.mark.e2e


async def _approved_in_the_inbox(served: Harness, page: Page, command: str) -> tuple[str, str]:
    """ALICE asks for `command`, APPROVER approves it in the inbox; the approval and the trace
    of the run it paused."""
    thread, approval_id = await pending_approval(served, command)
    await page.goto(await sign_in_link(served, APPROVER))
    await page.wait_for_url(re.compile(r"/console/$"))
    item = page.locator(f'[data-approval-id="{approval_id}"]')
    await item.locator('button[name="decision"][value="approve"]').first.click()
    await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))
    await served.await_posted(
        lambda call: call.method == "chat.postMessage" and "exit code 0" in str(call.params),
        "the answer in the thread",
        thread_ts=thread,
    )
    loaded = await served.service.runtime.wing.load(approval_id)
    assert loaded is not None and loaded[1].trace_id
    return approval_id, loaded[1].trace_id


async def test_runs_list_the_decision_and_a_run_draws_its_pause_and_resume(
    redis_url: str, workdir: Path, browser: Browser, page: Page
) -> None:
    (workdir / "build").mkdir()
    async with serving(redis_url, workdir, CLAWGATE_TRACE_MODE="metadata") as served:
        approval_id, paused = await _approved_in_the_inbox(served, page, "rm -rf build")

        # The approval's page links its run.
        await page.locator(f'a[href="/console/runs/{paused}"]').click()
        await page.wait_for_url(re.compile(f"/console/runs/{paused}$"))
        await page.goto(served.url("/console/runs"))
        section = page.locator(f'section[data-conversation$=":{CHANNEL}"]')
        row = section.locator(f'tr[data-trace-id="{paused}"]')
        text = await row.inner_text()
        assert f"slack:{ALICE}" in text  # who asked
        assert "bash" in text and "suspended" in text  # the call that waited
        assert f"{approval_id} bash: approved by slack:{APPROVER}" in " ".join(text.split())
        assert "approval_required" in await row.locator(".stopped").inner_text()
        resumed_row = section.locator("tr", has_text=f"resumes {paused} after {approval_id}")
        resumed = await resumed_row.get_attribute("data-trace-id")
        assert resumed and resumed != paused
        assert "completed" in await resumed_row.inner_text()  # the call ran, once
        assert "final" in await resumed_row.locator(".stopped").inner_text()
        await save_screenshot(page, "runs")
        conversation = await section.get_attribute("data-conversation")
        assert conversation
        await page.goto(served.url("/console/runs?conversation=slack:T111:C999"))
        assert await page.locator("tr[data-trace-id]").count() == 0
        await page.select_option('select[name="conversation"]', conversation)
        await page.locator('form.filters button[type="submit"]').click()
        await page.wait_for_url(re.compile(r"conversation="))
        assert await page.locator("tr[data-trace-id]").count() == 2

        await row.locator(f'a[href="/console/runs/{paused}"]').click()
        await page.wait_for_url(re.compile(f"/console/runs/{paused}$"))
        tree = page.locator("ul.tree")
        root = await tree.locator("code.span").first.inner_text()
        assert root.startswith("agent.run approval_required")
        pause = tree.locator(f'li.pause[data-approval-id="{approval_id}"]')
        assert "approval.pause" in await pause.locator("code.span").first.inner_text()
        link = pause.locator(f'a[href="/console/approvals/{approval_id}"]')
        assert await link.count() == 1
        # The resumed run hangs beneath the pause, linked.
        beneath = pause.locator(f'li.resumed[data-trace-id="{resumed}"]')
        assert "approval.resume final" in await beneath.locator("code.span").first.inner_text()
        assert "tool.call bash #0 completed" in await beneath.inner_text()
        trail = await page.locator("table.trail").first.inner_text()
        assert "approval_requested" in trail and "approval_decided" in trail
        await save_screenshot(page, "run")
        for unknown in ("0123456789abcdef", "%3Cscript%3E"):
            response = await page.goto(served.url(f"/console/runs/{unknown}"))
            assert response is not None and response.status == 404

        # The requester oversees no conversation: no runs, and a run's page is not found.
        context = await browser.new_context()
        alice = await context.new_page()
        try:
            await alice.goto(await sign_in_link(served, ALICE))
            await alice.wait_for_url(re.compile(r"/console/$"))
            await alice.goto(served.url("/console/runs"))
            assert await alice.locator("tr[data-trace-id]").count() == 0
            for trace in (paused, resumed):
                response = await alice.goto(served.url(f"/console/runs/{trace}"))
                assert response is not None and response.status == 404
            assert paused not in await alice.content()
        finally:
            await context.close()


async def test_without_its_trace_a_run_shows_its_audit_trail(
    redis_url: str, workdir: Path, page: Page
) -> None:
    (workdir / "dist").mkdir()
    async with serving(redis_url, workdir) as served:
        approval_id, paused = await _approved_in_the_inbox(served, page, "rm -rf dist")
        # The trace's TTL passed (or it was never stored): the audit trail still knows the run.
        audit = served.service.runtime.audit
        await audit.redis.delete(audit.keys.trace(paused))

        await page.goto(served.url(f"/console/runs/{paused}"))
        body = await page.locator("main").inner_text()
        assert "No trace is stored for this run" in body
        assert await page.locator("ul.tree").count() == 0
        trail = await page.locator("table.trail").first.inner_text()
        assert "approval_requested" in trail and f"slack:{APPROVER}" in trail
        assert await page.locator(f'table a[href="/console/approvals/{approval_id}"]').count()


async def test_a_run_page_shows_replayed_text_as_text_with_secrets_masked(
    redis_url: str, workdir: Path, page: Page
) -> None:
    secret = "sk-" + "q" * 40
    hostile = '<img src=x onerror="document.title=1">'
    async with serving(redis_url, workdir, CLAWGATE_TRACE_MODE="replay") as served:
        _, approval_id = await pending_approval(served, f"rm -rf '{hostile}' OPENAI_KEY={secret}")
        loaded = await served.service.runtime.wing.load(approval_id)
        assert loaded is not None and loaded[1].trace_id
        await page.goto(await sign_in_link(served, APPROVER))
        await page.wait_for_url(re.compile(r"/console/$"))

        await page.goto(served.url(f"/console/runs/{loaded[1].trace_id}"))
        payloads = await page.locator("ul.tree pre.payload").all_inner_texts()
        assert any(hostile in text for text in payloads)  # shown as text, not markup
        assert await page.locator("main img").count() == 0
        assert secret not in await page.content()
        await page.goto(served.url("/console/runs"))
        assert await page.locator("main img").count() == 0
        assert secret not in await page.content()
