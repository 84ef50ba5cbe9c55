"""The browser tests' fixtures: a headless Chromium driven by Playwright (`browser`), a fresh
context and page per test at a desktop (`page`) or phone (`phone`) viewport, and the whole
service to point them at (`served`, tests/browser/harness.py).

The browser is Debian's `chromium` (.ci/run installs it), never one Playwright downloads.
Without it, or without Playwright, the tests are skipped, and fail under CI=true. Each test
starts its own browser (0.7 s): a longer-lived one would be bound to another event loop than
the test's (pytest-asyncio runs each test and its fixtures on a loop of its own).
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import Harness, serving
from tests.conftest import _unavailable

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, ViewportSize

CHROMIUM = Path("/usr/bin/chromium")
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo model and the default policy, whatever the environment says."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REDIS_URL", "CLAWGATE_POLICY_FILE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if importlib.util.find_spec("playwright") is None:
        _unavailable("playwright is not installed (pip install -e '.[dev]')", "browser")
    if not CHROMIUM.is_file():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)", "browser")
    from playwright.async_api import async_playwright  # noqa: PLC0415 (only once it is there)

    async with async_playwright() as playwright:
        # --no-sandbox: Chromium's own sandbox refuses to start as root, as CI runs.
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def _page(browser: Browser, viewport: ViewportSize) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=viewport)
    try:
        yield await context.new_page()
    finally:
        await context.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A page in a context of its own (no cookies from another test), 1280x900."""
    async for opened in _page(browser, DESKTOP):
        yield opened


@pytest.fixture
async def phone(browser: Browser) -> AsyncIterator[Page]:
    """`page` at a phone's viewport, 390x844."""
    async for opened in _page(browser, PHONE):
        yield opened


@pytest.fixture
async def served(redis_url: str, workdir: Path) -> AsyncIterator[Harness]:
    """The whole service with its defaults (tests/browser/harness.py: `serving`)."""
    async with serving(redis_url, workdir) as harness:
        yield harness
