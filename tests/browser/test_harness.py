"""The browser tests' own ground: the whole service answers a Slack message, and a real
headless Chromium reads the pages it serves, at a desktop's and a phone's size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import ALICE, CHANNEL, Harness
from tests.browser.screenshots import save_screenshot

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = pytest.mark.e2e  # a browser and the whole service: the slow tier


async def test_a_slack_mention_is_answered_and_the_browser_reads_the_health_page(
    served: Harness, page: Page
) -> None:
    thread = await served.post_slack_message("run: echo hi", user=ALICE)

    # The demo model runs `echo hi` with bash; in its sandbox it needs no approval.
    answer = await served.await_posted(
        lambda call: call.params.get("text") == "hi\n[exit code 0]", "the answer", thread_ts=thread
    )
    assert answer.method == "chat.postMessage" and answer.params["channel"] == CHANNEL

    response = await page.goto(served.url("/healthz"))
    assert response is not None and response.status == 200
    assert (await page.inner_text("body")).strip() == "ok"
    shot = await save_screenshot(page, "healthz")
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


async def test_the_phone_page_has_a_phone_sized_window(served: Harness, phone: Page) -> None:
    await phone.goto(served.url("/healthz"))
    assert await phone.evaluate("[window.innerWidth, window.innerHeight]") == [390, 844]
