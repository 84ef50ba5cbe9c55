"""The console's Health and Insight pages in a real browser against the whole service.

Health (admins only): a `clawgate worker` process started beside the service shows up as
alive on an open page by itself (the page asks again every few seconds); killed with
SIGKILL, it shows as gone within its liveness time. Insight: decided approvals give the three
plots and, after enough approvals of one command, an "approve always?" suggestion; someone
who oversees no conversation sees none of it."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING

import pytest

from runtime.approval.stats import SUGGEST_MIN_APPROVED
from runtime.models import Actor, ConversationRef, StopReason
from tests.browser.harness import ADMIN, ALICE, APPROVER, CHANNEL, Harness
from tests.browser.screenshots import save_screenshot
from tests.browser.test_console_inbox import sign_in_link
from tests.fake_slack import TEAM_ID
from tests.processes import CLAWGATE, clean_env

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

pytestmark = pytest.mark.e2e

LIVENESS_TTL = 1.0  # CLAWGATE_LIVENESS_TTL of the worker that is killed (its least)
PAGE_LOAD_S = 1.0  # what a reload of the page may add to it


async def _signed_in(served: Harness, page: Page, user: str) -> None:
    await page.goto(await sign_in_link(served, user))
    await page.wait_for_url(re.compile(r"/console/$"))


async def test_a_killed_worker_shows_as_gone_within_its_liveness_time_to_admins_only(
    served: Harness, browser: Browser, page: Page
) -> None:
    await _signed_in(served, page, ADMIN)
    shown = await page.goto(served.url("/console/health"))
    assert shown is not None and shown.status == 200
    assert await page.inner_text("#readiness") == "ready"
    own = served.service.runtime.worker_id
    assert await page.get_attribute(f'tr[data-worker-id="{own}"]', "data-state") == "alive"

    env = clean_env(
        REDIS_URL=str(served.settings.redis_url),
        CLAWGATE_REDIS_PREFIX=served.prefix,
        CLAWGATE_WORKDIR=str(served.workdir),
        CLAWGATE_LIVENESS_TTL=str(LIVENESS_TTL),
    )
    proc = await asyncio.create_subprocess_exec(
        *CLAWGATE, "worker", cwd=served.workdir, env=env, stderr=asyncio.subprocess.DEVNULL
    )
    row = page.locator(f'tr[data-worker-id*=":{proc.pid}:"]')
    try:
        # No reload: the open page asks again by itself, and lists the new worker.
        await row.wait_for(timeout=30_000)
        assert await row.get_attribute("data-state") == "alive"
        assert "alive" in await row.inner_text()
    finally:
        proc.kill()
        await proc.wait()
    killed = time.monotonic()
    while await row.get_attribute("data-state") == "alive":
        assert time.monotonic() - killed < LIVENESS_TTL + PAGE_LOAD_S, "still alive"
        await page.reload()
    assert await row.get_attribute("data-state") == "gone"
    assert await row.locator(".badge.bad").inner_text() == "gone"
    assert await page.get_attribute(f'tr[data-worker-id="{own}"]', "data-state") == "alive"
    assert await page.inner_text("#readiness") == "ready"  # its own worker still polls
    await save_screenshot(page, "health")

    # Not an admin (an approver): no Health in the menu, and the page refuses.
    other = await browser.new_context()
    try:
        approver = await other.new_page()
        await _signed_in(served, approver, APPROVER)
        assert await approver.locator('nav a[href="/console/health"]').count() == 0
        refused = await approver.goto(served.url("/console/health"))
        assert refused is not None and refused.status == 403
        assert await approver.locator("#workers").count() == 0
    finally:
        await other.close()


async def _decided(served: Harness, command: str, approve: bool, n: int) -> None:
    """ALICE asks for `command` `n` times in the channel; the approver decides each."""
    runtime = served.service.runtime
    here = ConversationRef(
        platform="slack", id=f"slack:{TEAM_ID}:{CHANNEL}", data={"channel": CHANNEL}
    )
    alice, carol = Actor(platform="slack", user_id=ALICE), Actor(platform="slack", user_id=APPROVER)
    for _ in range(n):
        session = f"slack:{TEAM_ID}:{CHANNEL}:{time.monotonic_ns()}"
        asked = await runtime.run(session, f"run: {command}", alice, here)
        assert asked.stop_reason is StopReason.APPROVAL_REQUIRED and asked.approval_id
        decision = await runtime.decide(asked.approval_id, approve, carol, here, reason="no")
        assert decision.accepted, decision.message


async def test_insight_plots_decided_approvals_and_suggests_approving_always(
    served: Harness, page: Page
) -> None:
    await _decided(served, "rm -f build.log", True, SUGGEST_MIN_APPROVED)
    await _decided(served, "rm -rf dist", False, 1)

    await _signed_in(served, page, ADMIN)
    await page.goto(served.url("/console/insight?days=30"))
    assert await page.get_attribute('nav.periods a[aria-current="page"]', "href") == (
        "/console/insight?days=30"
    )
    summary = await page.inner_text("#summary")
    assert summary.startswith(f"{SUGGEST_MIN_APPROVED + 1} approval requests in the last 30 days")
    charts = page.locator('.charts svg[role="img"]')
    assert await charts.count() == 3
    labels = [await charts.nth(i).get_attribute("aria-label") for i in range(3)]
    assert labels == [
        "Time to decision per day (p50 and p90)",
        "Requests per tool",
        "Approved, rejected and expired per day",
    ]
    assert await page.locator(".charts .no-data").count() == 0
    assert await page.locator("#outcomes rect.bar-approved:not(.legend-swatch)").count() == 1
    assert await page.locator("#outcomes rect.bar-rejected:not(.legend-swatch)").count() == 1
    assert await page.locator("#requests_per_tool rect.bar-tool title").text_content() == "bash: 6"
    [suggestion] = await page.locator("#suggestions li").all_inner_texts()
    assert suggestion.startswith(
        f"`bash rm -f` approved {SUGGEST_MIN_APPROVED} of {SUGGEST_MIN_APPROVED} times in "
        f"slack:{TEAM_ID}:{CHANNEL}"
    )
    await save_screenshot(page, "insight")

    # Who oversees no conversation (neither admin nor approver) sees none of it.
    await page.context.clear_cookies()
    await _signed_in(served, page, ALICE)
    await page.goto(served.url("/console/insight"))
    assert (await page.inner_text("#summary")).startswith("0 approval requests in the last 7 days")
    assert await page.locator('.charts svg[role="img"] .no-data').count() == 3
    assert await page.locator("#suggestions").count() == 0
