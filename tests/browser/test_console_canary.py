"""A canary secret the agent can read never shows on a console page: planted in a work-dir
file, read by an unasked call, printed by an approved one, and typed into a call's arguments,
with traces recording replays (the most a page could show). Every page is read as an admin
(who sees everything); the Slack side is checked too."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import ADMIN, Harness, serving
from tests.browser.test_console_inbox import pending_approval, sign_in_link

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = pytest.mark.e2e

CANARY = "c4n4ryC4N4RYc4n4ry7q"  # the secret's body: no page may hold it
KEY = f"sk-proj-{CANARY}"
PAGES = (
    "/console/",
    "/console/audit",
    "/console/runs",
    "/console/grants",
    "/console/policy",
    "/console/health",
    "/console/insight",
)


@pytest.fixture
async def replaying(redis_url: str, workdir: Path) -> AsyncIterator[Harness]:
    async with serving(redis_url, workdir, CLAWGATE_TRACE_MODE="replay") as served:
        yield served


async def test_a_secret_the_agent_reads_shows_on_no_console_page(
    replaying: Harness, page: Page
) -> None:
    served = replaying
    (served.workdir / "deploy.txt").write_text(f"OPENAI_API_KEY={KEY}\n")
    read = await served.post_slack_message("read deploy.txt")
    await served.await_posted(lambda call: "deploy" in str(call.params), "the read", thread_ts=read)
    _, printed = await pending_approval(served, "cat deploy.txt && rm deploy.txt")
    _, typed = await pending_approval(served, f"echo {KEY} > token.txt")

    await page.goto(await sign_in_link(served, ADMIN))
    await page.wait_for_url(re.compile(r"/console/$"))
    item = page.locator(f'[data-approval-id="{printed}"]')
    await item.locator('button[name="decision"][value="approve"]').first.click()
    await page.wait_for_url(re.compile(f"/console/approvals/{printed}$"))
    await served.await_posted(lambda call: "exit code 0" in str(call.params), "the output")

    seen = []
    for path in (*PAGES, f"/console/approvals/{printed}", f"/console/approvals/{typed}"):
        await page.goto(served.url(path))
        seen.append((path, await page.content()))
    runs = await page.locator('a[href^="/console/runs/"]').evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    assert runs, "the runs page links no run"
    for path in sorted(set(runs)):
        await page.goto(served.url(path))
        seen.append((path, await page.content()))

    assert [path for path, html in seen if CANARY in html] == []
    assert "[redacted]" in dict(seen)[f"/console/approvals/{typed}"]  # it was there, masked
    assert [c.method for c in served.fake.calls() if CANARY in str(c.params)] == []
