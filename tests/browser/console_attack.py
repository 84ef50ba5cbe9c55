"""What the console's security tests share: signing in without a browser (a session cookie and
its form token), plain HTTP requests that show the status and headers a browser would get,
and the check that a page shows hostile text as text (tests/browser/xss_payloads.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING

import aiohttp
from multidict import CIMultiDictProxy

from adapters.web.signin import COOKIE
from runtime.models import Actor
from tests.browser.harness import Harness
from tests.browser.xss_payloads import INJECTED

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Dialog, Page

TABS = 4  # pages visited at once


@dataclass
class Reply:
    status: int
    headers: CIMultiDictProxy[str]
    text: str

    def cookie(self) -> SimpleCookie:
        jar: SimpleCookie = SimpleCookie()
        for header in self.headers.getall("Set-Cookie", []):
            jar.load(header)
        return jar


async def request(
    served: Harness,
    method: str,
    path: str,
    *,
    cookie: str = "",
    data: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One request as a browser with `cookie` (a session's cookie value) would make it; a
    redirect is returned, not followed."""
    sent = dict(headers or {})
    if cookie:
        sent["Cookie"] = f"{COOKIE}={cookie}"
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method, served.url(path), data=data, headers=sent, allow_redirects=False
        ) as resp,
    ):
        return Reply(resp.status, resp.headers, await resp.text())


async def link_token(served: Harness, user: str) -> str:
    """A fresh sign-in link's token for slack:`user` (as `clawgate console link` makes it)."""
    access = served.service.runtime.sign_in
    assert access is not None
    link = await access.link(Actor(platform="slack", user_id=user))
    return link.partition("token=")[2]


@dataclass
class Signed:
    cookie: str
    csrf: str


async def signed_in(served: Harness, user: str) -> Signed:
    """slack:`user` signs in with a fresh link: their session's cookie and form token."""
    reply = await request(served, "GET", f"/console/login?token={await link_token(served, user)}")
    assert reply.status == 303, reply.text
    cookie = reply.cookie()[COOKIE].value
    access = served.service.runtime.sign_in
    assert access is not None
    session = await access.session(cookie)
    assert session is not None
    return Signed(cookie, session.csrf)


@dataclass
class Watched:
    """A page whose dialogs (alert, confirm, prompt) are counted and dismissed."""

    page: Page
    dialogs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("dialog", self._seen)

    def _seen(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        asyncio.get_running_loop().create_task(dialog.dismiss())


def _flat(text: str) -> str:
    return " ".join(text.split())


async def assert_inert(watched: Watched, shown: Iterable[str] = ()) -> None:
    """The page as it is now ran no script of a payload, holds no element or attribute a
    template did not put there, and shows each of `shown` as text."""
    page = watched.page
    await page.wait_for_load_state("load")
    found = await page.evaluate(INJECTED)
    assert found == [], f"{page.url}: injected {found}"
    assert watched.dialogs == [], f"{page.url}: dialogs {watched.dialogs}"
    text = _flat(await page.text_content("body") or "")
    missing = [s for s in shown if _flat(s) not in text]
    assert missing == [], f"{page.url}: not shown as text: {missing}"


async def assert_all_inert(
    context: BrowserContext, visits: Sequence[tuple[str, Sequence[str]]], *, found: bool = True
) -> None:
    """`assert_inert` for each (url, what it shows) of `visits`, a few tabs at a time;
    `found`: every page is there (not a 404, nor a sign-in page)."""

    async def tab(share: Sequence[tuple[str, Sequence[str]]]) -> None:
        watched = Watched(await context.new_page())
        try:
            for url, shown in share:
                response = await watched.page.goto(url)
                assert response is not None
                assert response.ok or not found, f"{url}: {response.status}"
                await assert_inert(watched, shown)
        finally:
            await watched.page.close()

    await asyncio.gather(*(tab(visits[n::TABS]) for n in range(TABS)))
