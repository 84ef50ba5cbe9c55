"""Every way to decide in the console, in a real browser: approve always with a scope and an
end (the grant is there), edit and approve (the edited call runs), reject with a reason (the
thread says who and why), a batch decided at once (each call runs once); and the inbox on a
phone."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import APPROVER, Harness, serving
from tests.browser.screenshots import save_screenshot
from tests.browser.test_console_inbox import pending_approval, sign_in_link
from tests.fake_openai import FakeOpenAI, Step, calls, reply

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = pytest.mark.e2e


async def signed_in(served: Harness, page: Page, user: str = APPROVER) -> None:
    await page.goto(await sign_in_link(served, user))
    await page.wait_for_url(re.compile(r"/console/$"))


async def test_approve_always_with_a_scope_and_an_end_leaves_a_grant(
    served: Harness, page: Page
) -> None:
    thread, approval_id = await pending_approval(served, "rm -rf build")
    await signed_in(served, page)
    item = page.locator(f'[data-approval-id="{approval_id}"]')
    await item.locator('select[name="duration"]').select_option("2h")
    await item.locator('button[name="decision"][value="approve_always"]').click()
    await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))
    grants = await served.service.runtime.approvals.grants.all()
    assert [g.by for g in grants] == [f"slack:{APPROVER}"]
    assert grants[0].expires_at is not None
    await served.await_posted(
        lambda call: "exit code 0" in str(call.params), "the answer", thread_ts=thread
    )


async def test_edit_and_approve_runs_the_edited_call(served: Harness, page: Page) -> None:
    (served.workdir / "build" / "tmp").mkdir(parents=True)
    (served.workdir / "build" / "keep.txt").write_text("kept")
    thread, approval_id = await pending_approval(served, "rm -rf build")
    await signed_in(served, page)
    item = page.locator(f'[data-approval-id="{approval_id}"]')
    await item.locator("details.edit summary").click()
    await item.locator('textarea[name="edit"]').fill(json.dumps({"command": "rm -rf build/tmp"}))
    await item.locator('details.edit button[name="decision"][value="approve"]').click()
    await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))
    await served.await_posted(
        lambda call: "exit code 0" in str(call.params), "the answer", thread_ts=thread
    )
    assert not (served.workdir / "build" / "tmp").exists()
    assert (served.workdir / "build" / "keep.txt").read_text() == "kept"
    assert "build/tmp" in await page.inner_text("pre.diff")


async def test_reject_with_a_reason_tells_the_thread_and_runs_nothing(
    served: Harness, page: Page
) -> None:
    (served.workdir / "build").mkdir()
    thread, approval_id = await pending_approval(served, "rm -rf build")
    await signed_in(served, page)
    item = page.locator(f'[data-approval-id="{approval_id}"]')
    await item.locator('input[name="reason"]').fill("not on a Friday")
    await item.locator('button[name="decision"][value="reject"]').click()
    await page.wait_for_url(re.compile(f"/console/approvals/{approval_id}$"))
    await served.await_posted(
        lambda call: call.method == "chat.update" and "not on a Friday" in str(call.params),
        "the notice says who rejected it and why",
        thread_ts=thread,
    )
    assert (served.workdir / "build").is_dir()
    assert "rejected" in await page.inner_text(".status")


def _batch_turn(body: dict[str, Any]) -> Step:
    """Asked anything, three appends to runs.log in one turn; given their results, done."""
    if body["messages"][-1]["role"] != "tool":
        echo = [(f"c{k}", "bash", {"command": f"echo line-{k} >> runs.log"}) for k in "123"]
        return calls(*echo)
    return reply("done")


@pytest.fixture
async def batch_served(redis_url: str, workdir: Path) -> AsyncIterator[Harness]:
    model = FakeOpenAI()
    model.respond = _batch_turn
    await model.start()
    try:
        async with serving(redis_url, workdir, **model.settings()) as served:
            yield served
    finally:
        await model.stop()


async def test_a_batch_is_decided_at_once_and_each_call_runs_once(
    batch_served: Harness, page: Page
) -> None:
    served = batch_served
    thread = await served.post_slack_message("append three lines")
    await served.await_posted(
        lambda call: "blocks" in call.params, "the batch notice", "chat.postMessage"
    )
    await signed_in(served, page)
    group = page.locator("[data-batch-id]")
    await group.wait_for()
    assert await group.locator("article[data-approval-id]").count() == 3
    shown = await group.locator("article pre.args").all_inner_texts()
    assert shown == [f"echo line-{k} >> runs.log" for k in "123"]  # in the model's order
    assert await group.locator("form.decide + details.edit").count() == 3  # per call only
    await save_screenshot(page, "batch")
    await group.locator('form.decide button[name="decision"][value="approve"]').first.click()
    await page.wait_for_url(re.compile(r"/console/$"))
    await served.await_posted(
        lambda call: call.params.get("text") == "done", "the answer", thread_ts=thread
    )
    lines = (served.workdir / "runs.log").read_text().split()
    assert sorted(lines) == ["line-1", "line-2", "line-3"]


async def test_the_inbox_fits_a_phone(served: Harness, phone: Page) -> None:
    _, approval_id = await pending_approval(served, "rm -rf build")
    await signed_in(served, phone)
    await phone.locator(f'[data-approval-id="{approval_id}"]').wait_for()
    width = await phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width} px)"
    await save_screenshot(phone, "inbox-phone")
