"""The console attacked: hostile text in every field it renders (XSS), forged and cross-site
requests (CSRF), planted and forged session cookies (fixation), redirects off the console,
framing (clickjacking), the session cookie's attributes, sign-in links used twice, late,
guessed or hammered, and sessions ended from the command line or by idling.

The XSS tests make their hostile approvals the way an attacker would: a Slack message
`run: sed '--<payload>' f` from a user whose id and channel carry payloads too (Slack signs
what it sends; the fields are free text to the service). The risk policy quotes the sed
option in its reason, so one message puts a payload in the arguments, the reasons, the
requester and the conversation. A rejection's reason and an approver's edit go through the
console's own decide form. The browser runs them with the CSP bypassed: the escaping alone
must hold, the CSP is a second wall (its header is checked on its own)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from aiohttp import web

from adapters.web.pages.inbox import FILTERS
from adapters.web.signin import COOKIE
from bot.cli_console import run_console_command
from bot.cli_parser import build_parser
from runtime.approval.models import ApprovalRecord
from runtime.store.keys import Keys
from tests.browser.console_attack import (
    Signed,
    Watched,
    assert_all_inert,
    assert_inert,
    link_token,
    request,
    signed_in,
)
from tests.browser.harness import ADMIN, ALICE, APPROVER, Harness, serving
from tests.browser.test_console_inbox import pending_approval
from tests.browser.xss_payloads import PAYLOADS
from tests.conftest import free_port

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

pytestmark = pytest.mark.e2e

# The console's pages that may show what hostile approvals hold (their requests, reasons,
# requesters, conversations, audit entries, runs), visited signed in as an admin, who sees
# everything. Each must stay inert; True: it must also show every payload it is about as
# text (a reason, the requester and the conversation of each approval). "{approval}" and
# "{trace}" are each hostile approval's id and its run's. A new page that shows any of it
# belongs here.
HOSTILE_PAGES: dict[str, bool] = {
    "/console/": True,
    "/console/approvals/{approval}": True,
    "/console/audit": True,
    "/console/runs": False,
    "/console/runs/{trace}": True,
    "/console/grants": False,
    "/console/insight": False,
    "/console/policy": False,
    "/console/health": False,
}


def sed_of(payload: str) -> str:
    """The command whose risk reason quotes `payload` ("sed option --… is not known…")."""
    return f"sed {shlex.quote('--' + payload)} f"


def slack_escaped(text: str) -> str:
    """`text` as Slack sends what a person typed (`&`, `<` and `>` as entities)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def hostile_approvals(served: Harness) -> dict[str, str]:
    """One approval per payload, asked for from Slack by a user and in a channel whose ids
    carry the payload too: approval id -> payload."""
    for index, payload in enumerate(PAYLOADS):
        # A session id holds no spaces or braces (the service refuses such a channel).
        channel = f"C{index}" + ("" if re.search(r"[\s{}]", payload) else payload)
        await served.post_slack_message(
            slack_escaped(f"run: {sed_of(payload)}"), user=f"U{index}{payload}", channel=channel
        )
    wing = served.service.runtime.wing
    deadline = time.monotonic() + 10
    while len(pending := await wing.pending()) < len(PAYLOADS):
        assert time.monotonic() < deadline, f"{len(pending)} of {len(PAYLOADS)} approvals asked"
        await asyncio.sleep(0.05)
    made: dict[str, str] = {}
    for approval in pending:
        loaded = await wing.load(approval.approval_id)
        assert loaded is not None
        record = loaded[0]
        command = json.loads(record.arguments)["command"]
        made[record.id] = next(p for p in PAYLOADS if command == sed_of(p))
    return made


def shown_on(record: ApprovalRecord, payload: str) -> list[str]:
    """What of `payload` a page about `record` shows verbatim: its reason, its requester and
    its conversation."""
    return [f"sed option --{payload} is not known", record.requester.key, record.conversation.id]


@contextlib.asynccontextmanager
async def hostile_browser(browser: Browser, served: Harness, user: str) -> AsyncIterator[Watched]:
    """A page signed in as `user`, with the CSP bypassed and its dialogs counted."""
    context = await browser.new_context(bypass_csp=True)
    try:
        page = await context.new_page()
        await page.goto(served.url(f"/console/login?token={await link_token(served, user)}"))
        await page.wait_for_url(re.compile(r"/console/$"))
        yield Watched(page)
    finally:
        await context.close()


# -- XSS ----------------------------------------------------------------------------------------


async def test_hostile_arguments_reasons_names_and_conversations_render_as_text(
    served: Harness, browser: Browser
) -> None:
    made = await hostile_approvals(served)
    wing = served.service.runtime.wing
    visits: list[tuple[str, list[str]]] = []
    facts: dict[str, list[str]] = {}  # approval id -> what a page about it shows
    traces: dict[str, str] = {}  # approval id -> the run that asked for it
    for approval_id, payload in made.items():
        loaded = await wing.load(approval_id)
        assert loaded is not None
        facts[approval_id] = shown_on(loaded[0], payload)
        traces[approval_id] = loaded[1].trace_id or ""
    for path, shows in HOSTILE_PAGES.items():
        if "{" in path:
            for approval_id, shown in facts.items():
                url = served.url(path.format(approval=approval_id, trace=traces[approval_id]))
                visits.append((url, shown if shows else []))
        else:
            every = [fact for shown in facts.values() for fact in shown]
            visits.append((served.url(path), every if shows else []))
    async with hostile_browser(browser, served, ADMIN) as watched:
        page = watched.page
        await assert_all_inert(page.context, visits)

        # The inbox updates itself (console.js re-parses the page it fetched): still inert.
        await page.goto(served.url("/console/"))
        await page.wait_for_selector("body[data-live-open]")
        await served.service.runtime.audit.record("approval_probe", "slack:U_NOBODY")
        await page.wait_for_selector("body[data-refreshed]")
        await assert_inert(watched, PAYLOADS)


async def test_reflected_ids_and_filters_render_as_text(served: Harness, browser: Browser) -> None:
    wanted = "&".join(f"{name}={quote(PAYLOADS[n], safe='')}" for n, name in enumerate(FILTERS))
    paths = [f"/console/approvals/{quote(payload, safe='')}" for payload in PAYLOADS]
    async with hostile_browser(browser, served, ADMIN) as watched:
        visits = [(served.url(path), ()) for path in [*paths, f"/console/?{wanted}"]]
        await assert_all_inert(watched.page.context, visits, found=False)


async def test_a_hostile_rejection_reason_and_edit_render_as_text(
    served: Harness, browser: Browser
) -> None:
    reason = PAYLOADS[1] + PAYLOADS[5] + PAYLOADS[16]
    edited = PAYLOADS[9] + PAYLOADS[21]
    _, rejected = await pending_approval(served, "rm -rf rejected")
    approver = await signed_in(served, APPROVER)
    decided = await request(
        served,
        "POST",
        f"/console/approvals/{rejected}/decide",
        cookie=approver.cookie,
        data={"csrf": approver.csrf, "decision": "reject", "reason": reason},
    )
    assert decided.status == 303, decided.text
    _, changed = await pending_approval(served, "rm -rf changed")
    decided = await request(
        served,
        "POST",
        f"/console/approvals/{changed}/decide",
        cookie=approver.cookie,
        data={
            "csrf": approver.csrf,
            "decision": "approve",
            "edit": json.dumps({"command": f"printf %s {shlex.quote(edited)}"}),
        },
    )
    assert decided.status == 303, decided.text
    async with hostile_browser(browser, served, APPROVER) as watched:
        await watched.page.goto(served.url(f"/console/approvals/{rejected}"))
        await assert_inert(watched, [reason])
        await watched.page.goto(served.url(f"/console/approvals/{changed}"))
        await watched.page.locator("pre.diff").wait_for()
        await assert_inert(watched, [PAYLOADS[9]])


async def test_grants_of_hostile_calls_render_as_text(served: Harness, browser: Browser) -> None:
    admin = await signed_in(served, ADMIN)
    hostile = [PAYLOADS[n] for n in (1, 4, 12, 16, 19, 21)]
    for payload in hostile:
        _, approval_id = await pending_approval(served, slack_escaped(sed_of(payload)))
        decided = await request(
            served,
            "POST",
            f"/console/approvals/{approval_id}/decide",
            cookie=admin.cookie,
            data={"csrf": admin.csrf, "decision": "approve_always", "scope": "everywhere"},
        )
        assert decided.status == 303, decided.text
    async with hostile_browser(browser, served, ADMIN) as watched:
        await watched.page.goto(served.url("/console/grants"))
        await assert_inert(watched, [f"bash sed --{payload}" for payload in hostile])


async def test_hostile_fields_only_redis_holds_render_as_text(
    served: Harness, browser: Browser
) -> None:
    """What no message can set (a worker's name, an outcome, notes, where notices were
    posted, the approval's audit trail) is written into Redis directly, as a compromised
    worker or a future code path could."""
    _, approval_id = await pending_approval(served, "rm -rf stored")
    store = served.service.runtime.wing.store
    session = await store.session_of(approval_id)
    assert session is not None
    key = Keys(served.prefix).approval(session, approval_id)
    record = json.loads(await served.redis.hget(key, "record") or "{}")
    record |= {
        "always": "never",
        "no_always": PAYLOADS[1],
        "runs_with": PAYLOADS[4],
        "unapproved_changes": [PAYLOADS[2], PAYLOADS[20]],
    }
    await served.redis.hset(
        key,
        mapping={
            "record": json.dumps(record),
            "outcome": PAYLOADS[9],
            "worker": PAYLOADS[16],
            "notice": json.dumps({"channel": PAYLOADS[13], PAYLOADS[5]: PAYLOADS[17]}),
            "copies": json.dumps([{"conversation": PAYLOADS[18], "ts": PAYLOADS[27]}]),
        },
    )
    await store.audit(session, PAYLOADS[10], approval_id, PAYLOADS[11], PAYLOADS[14])
    shown = [PAYLOADS[n] for n in (1, 4, 9, 16, 13, 5, 17, 18, 27, 10, 11, 14)]
    async with hostile_browser(browser, served, ADMIN) as watched:
        await watched.page.goto(served.url(f"/console/approvals/{approval_id}"))
        await assert_inert(watched, shown)
        await watched.page.goto(served.url("/console/"))
        await assert_inert(watched, [PAYLOADS[1], PAYLOADS[4]])


async def test_the_csp_stops_a_payload_that_got_into_a_page(served: Harness, page: Page) -> None:
    """The second wall: were a payload put into a page (here by the test itself), the
    policy would neither run its handler or inline script nor let it load from elsewhere."""
    watched = Watched(page)
    await page.goto(served.url(f"/console/login?token={await link_token(served, APPROVER)}"))
    await page.wait_for_url(re.compile(r"/console/$"))
    blocked = await page.evaluate(
        """() => new Promise((done) => {
            const seen = [];
            document.addEventListener(
                "securitypolicyviolation", (e) => seen.push(e.violatedDirective));
            document.body.insertAdjacentHTML("beforeend",
                '<img src="x" onerror="alert(1)">'
                + '<img src="https://evil.example/x.png">');
            const s = document.createElement("script");
            s.textContent = "alert(2)";
            document.body.appendChild(s);
            setTimeout(() => done(seen), 300);
        })"""
    )
    assert watched.dialogs == []
    assert {"script-src-attr", "script-src-elem", "img-src"} <= set(blocked), blocked


# -- CSRF ---------------------------------------------------------------------------------------


async def refusals(served: Harness) -> list[tuple[str, str]]:
    """The refused console requests so far: (who they claimed to be, why)."""
    return [
        (entry.actor, str(entry.fields.get("why")))
        async for entry in served.service.runtime.audit.since(0)
        if entry.event == "console_refused"
    ]


async def test_forged_and_cross_site_posts_are_refused_audited_and_decide_nothing(
    served: Harness,
) -> None:
    _, approval_id = await pending_approval(served, "rm -rf forged")
    carol, admin = await signed_in(served, APPROVER), await signed_in(served, ADMIN)
    decide = f"/console/approvals/{approval_id}/decide"
    attempts = {
        "no token": ({"decision": "approve"}, {}),
        "another session's token": ({"decision": "approve", "csrf": admin.csrf}, {}),
        "a foreign origin": (
            {"decision": "approve", "csrf": carol.csrf},
            {"Origin": "https://evil.example"},
        ),
        "an opaque origin": ({"decision": "approve", "csrf": carol.csrf}, {"Origin": "null"}),
    }
    for what, (form, headers) in attempts.items():
        reply = await request(
            served, "POST", decide, cookie=carol.cookie, data=form, headers=headers
        )
        assert reply.status == 403, what
        assert "refused" in reply.text, what
    # A request that names no session at all is refused too (and claims no one).
    anonymous = await request(served, "POST", decide, data={"decision": "approve"})
    assert anonymous.status == 403

    refused = await refusals(served)
    assert [who for who, _ in refused] == [f"slack:{APPROVER}"] * 4 + [""]
    assert "another site (https://evil.example)" in refused[2][1]
    loaded = await served.service.runtime.wing.load(approval_id)
    assert loaded is not None and loaded[0].status.value == "pending"


def console_posts(served: Harness) -> list[str]:
    """Every POST route of the console (a page added later is covered by itself), its
    parameters filled with `x`."""
    for resource in served.server.app.router.resources():
        info = resource.get_info()
        if info.get("prefix") == "/console":
            console: web.Application = info["app"]
            return sorted(
                re.sub(r"{[^}]+}", "x", route.resource.canonical)
                for route in console.router.routes()
                if route.method == "POST" and route.resource is not None
            )
    raise AssertionError("no console mounted")


async def test_every_post_route_refuses_a_request_without_this_sessions_token_or_by_get(
    served: Harness,
) -> None:
    admin, other = await signed_in(served, ADMIN), await signed_in(served, APPROVER)
    posts = console_posts(served)
    assert "/console/approvals/x/decide" in posts and "/console/logout" in posts
    for path in posts:
        for form, headers in (
            ({}, {}),
            ({"csrf": other.csrf}, {}),
            ({"csrf": admin.csrf}, {"Origin": "https://evil.example"}),
        ):
            reply = await request(
                served, "POST", path, cookie=admin.cookie, data=form, headers=headers
            )
            assert reply.status == 403, (path, form, headers)
        as_get = await request(served, "GET", f"{path}?csrf={admin.csrf}", cookie=admin.cookie)
        assert as_get.status == 405, path  # a link or an <img> changes nothing
    refused = await refusals(served)
    assert len(refused) == 3 * len(posts)
    assert {who for who, _ in refused} == {f"slack:{ADMIN}"}
    assert (await request(served, "GET", "/console/", cookie=admin.cookie)).status == 200


async def test_a_get_never_changes_anything(served: Harness) -> None:
    _, approval_id = await pending_approval(served, "rm -rf by-get")
    carol = await signed_in(served, APPROVER)
    query = f"decision=approve&csrf={carol.csrf}"
    for path in (f"/console/approvals/{approval_id}/decide?{query}", f"/console/logout?{query}"):
        reply = await request(served, "GET", path, cookie=carol.cookie)
        assert reply.status == 405, path
    loaded = await served.service.runtime.wing.load(approval_id)
    assert loaded is not None and loaded[0].status.value == "pending"
    still = await request(served, "GET", "/console/", cookie=carol.cookie)
    assert still.status == 200 and approval_id in still.text  # still signed in

    # Signing out is a POST with the token; without it the session lives on.
    refused = await request(served, "POST", "/console/logout", cookie=carol.cookie)
    assert refused.status == 403
    assert (await request(served, "GET", "/console/", cookie=carol.cookie)).status == 200
    out = await request(
        served, "POST", "/console/logout", cookie=carol.cookie, data={"csrf": carol.csrf}
    )
    assert out.status == 200
    assert (await request(served, "GET", "/console/", cookie=carol.cookie)).status == 401


@contextlib.asynccontextmanager
async def other_site(html: str) -> AsyncIterator[str]:
    """A page on another origin (127.0.0.1, another port) serving `html`: its URL."""
    app = web.Application()

    async def serve(_: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    app.router.add_get("/", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


async def test_a_page_on_another_site_can_neither_post_a_decision_nor_frame_the_console(
    served: Harness, page: Page
) -> None:
    _, approval_id = await pending_approval(served, "rm -rf cross-site")
    await page.goto(served.url(f"/console/login?token={await link_token(served, APPROVER)}"))
    await page.wait_for_url(re.compile(r"/console/$"))
    decide = served.url(f"/console/approvals/{approval_id}/decide")
    attack = (
        f'<form id="f" method="post" action="{decide}">'
        '<input name="decision" value="approve"><input name="csrf" value="guess"></form>'
        f'<iframe id="framed" src="{served.url("/console/")}"></iframe>'
    )
    async with other_site(attack) as url:
        await page.goto(url)
        framed = page.frame_locator("#framed")
        await page.wait_for_load_state("load")
        assert await framed.locator("header.top").count() == 0  # refused to render framed
        async with page.expect_navigation():
            await page.evaluate("document.getElementById('f').submit()")
        assert "refused" in await page.inner_text("body")
    refused = await refusals(served)
    assert refused and refused[-1][0] == f"slack:{APPROVER}"
    assert "another site (http://127.0.0.1:" in refused[-1][1]
    loaded = await served.service.runtime.wing.load(approval_id)
    assert loaded is not None and loaded[0].status.value == "pending"


# -- Session fixation ---------------------------------------------------------------------------


async def test_a_planted_cookie_is_replaced_at_sign_in_and_a_forged_one_does_nothing(
    served: Harness, page: Page
) -> None:
    planted = "attacker-chose-this-session-id-0123456789abcdef"
    await page.context.add_cookies(
        [{"name": COOKIE, "value": planted, "url": served.url("/console/")}]
    )
    shown = await page.goto(served.url("/console/"))
    assert shown is not None and shown.status == 401
    assert "Sign in with a link" in await page.inner_text("main")

    await page.goto(served.url(f"/console/login?token={await link_token(served, APPROVER)}"))
    await page.wait_for_url(re.compile(r"/console/$"))
    cookies = [c for c in await page.context.cookies() if c["name"] == COOKIE]
    assert len(cookies) == 1 and cookies[0]["value"] != planted
    access = served.service.runtime.sign_in
    assert access is not None
    assert await access.session(planted) is None
    assert (await access.session(cookies[0]["value"])) is not None

    # A second sign-in in the same browser ends the session it replaces.
    first = cookies[0]["value"]
    await page.goto(served.url(f"/console/login?token={await link_token(served, APPROVER)}"))
    await page.wait_for_url(re.compile(r"/console/$"))
    assert await access.session(first) is None
    assert len(await access.sessions()) == 1


# -- Open redirects -----------------------------------------------------------------------------


async def test_no_request_sends_the_browser_off_the_console(served: Harness) -> None:
    token = await link_token(served, APPROVER)
    tails = "&next=https://evil.example/&redirect=//evil.example&return_to=%2F%2Fevil.example"
    login = await request(served, "GET", f"/console/login?token={token}{tails}")
    assert login.status == 303 and login.headers["Location"] == "/console/welcome"
    carol = Signed(login.cookie()[COOKIE].value, "")
    for path in (
        "/console//evil.example",
        "/console/%2F%2Fevil.example",
        "/console/%5C%5Cevil.example",
        "/console/static//evil.example",
        "/console/static/..%2f..%2f..%2fetc%2fpasswd",
        "/console/approvals/%2F%2Fevil.example",
        "/console/login?token=x.y&next=//evil.example",
        "/console/welcome?next=//evil.example",
        "/console",
    ):
        reply = await request(served, "GET", path, cookie=carol.cookie)
        location = reply.headers.get("Location", "")
        assert not re.match(r"^(/[/\\]|[a-z][\w+.-]*:)", location, re.I), (path, location)
        assert "evil.example" not in location and "passwd" not in reply.text, path
    welcome = await request(served, "GET", "/console/welcome?next=//evil.example")
    assert 'content="0; url=/console/"' in welcome.text


# -- Clickjacking and headers -------------------------------------------------------------------


async def test_every_console_response_forbids_framing(served: Harness) -> None:
    carol = await signed_in(served, APPROVER)
    responses = {
        "inbox": await request(served, "GET", "/console/", cookie=carol.cookie),
        "401": await request(served, "GET", "/console/"),
        "403 refused post": await request(served, "POST", "/console/logout", cookie=carol.cookie),
        "404 approval": await request(
            served, "GET", "/console/approvals/nope", cookie=carol.cookie
        ),
        "404 route": await request(served, "GET", "/console/no/such/page", cookie=carol.cookie),
        "405": await request(served, "GET", "/console/logout", cookie=carol.cookie),
        "css": await request(served, "GET", "/console/static/console.css"),
        "js": await request(served, "GET", "/console/static/console.js"),
        "static 404": await request(served, "GET", "/console/static/nope.js"),
        "login 403": await request(served, "GET", "/console/login?token=bad.link"),
        "login 303": await request(
            served, "GET", f"/console/login?token={await link_token(served, ALICE)}"
        ),
        "welcome": await request(served, "GET", "/console/welcome"),
    }
    async with asyncio.timeout(5):  # the event stream sends its headers, then waits
        import aiohttp  # noqa: PLC0415

        async with (
            aiohttp.ClientSession() as http,
            http.get(
                served.url("/console/events"), headers={"Cookie": f"{COOKIE}={carol.cookie}"}
            ) as events,
        ):
            assert events.status == 200
            responses["events"] = type(responses["inbox"])(events.status, events.headers, "")
    policy = responses["inbox"].headers["Content-Security-Policy"]
    directives = {d.strip().partition(" ")[0]: d.strip() for d in policy.split(";")}
    assert directives["default-src"] == "default-src 'none'"
    assert directives["script-src"] == "script-src 'self'"  # no inline code, no eval
    assert directives["form-action"] == "form-action 'self'"  # an injected form posts nowhere
    assert directives["base-uri"] == "base-uri 'none'"  # an injected <base> moves no link
    assert "unsafe" not in policy
    for what, reply in responses.items():
        assert "frame-ancestors 'none'" in reply.headers.get("Content-Security-Policy", ""), what
        assert reply.headers.get("X-Frame-Options") == "DENY", what
        assert reply.headers.get("X-Content-Type-Options") == "nosniff", what
        if what not in ("css", "js"):  # a page seen signed in is not kept for the back button
            assert reply.headers.get("Cache-Control") == "no-store", what


# -- The session cookie -------------------------------------------------------------------------


async def test_the_session_cookie_is_httponly_strict_and_scoped_to_the_console(
    served: Harness, page: Page
) -> None:
    login = await request(served, "GET", f"/console/login?token={await link_token(served, ALICE)}")
    morsel = login.cookie()[COOKIE]
    assert morsel["httponly"] is True
    assert morsel["samesite"] == "Strict"
    assert morsel["path"] == "/console/"
    assert not morsel["secure"]  # served over plain http here: a Secure cookie would be lost

    await page.goto(served.url(f"/console/login?token={await link_token(served, ALICE)}"))
    await page.wait_for_url(re.compile(r"/console/$"))
    assert await page.evaluate("document.cookie") == ""  # out of a script's reach


async def test_over_https_the_session_cookie_is_secure(redis_url: str, workdir: Path) -> None:
    async with serving(
        redis_url, workdir, public_url="https://console.example", start_worker=False
    ) as served:
        login = await request(
            served, "GET", f"/console/login?token={await link_token(served, ALICE)}"
        )
        assert login.status == 303
        morsel = login.cookie()[COOKIE]
        assert morsel["secure"] is True
        assert morsel["httponly"] is True and morsel["samesite"] == "Strict"


# -- Sign-in links ------------------------------------------------------------------------------


async def sign_in_refusals(served: Harness) -> list[str]:
    return [
        str(entry.fields.get("why"))
        async for entry in served.service.runtime.audit.since(0)
        if entry.event == "console_sign_in_refused"
    ]


async def test_a_link_works_once_in_time_and_a_wrong_secret_burns_it(served: Harness) -> None:
    async def login(token: str) -> int:
        return (await request(served, "GET", f"/console/login?token={token}")).status

    used = await link_token(served, ALICE)
    assert await login(used) == 303
    assert await login(used) == 403  # reused

    late = await link_token(served, ALICE)
    keys = Keys(served.prefix)
    await served.redis.pexpire(keys.console_link(late.partition(".")[0]), 1)
    await asyncio.sleep(0.01)
    assert await login(late) == 403  # its key expired

    stale = await link_token(served, ALICE)
    key = keys.console_link(stale.partition(".")[0])
    raw = await served.redis.get(key)
    assert raw is not None
    stored = json.loads(raw)
    await served.redis.set(key, json.dumps(stored | {"expires_at": 1}), ex=600)
    assert await login(stale) == 403  # its stored expiry passed, whatever the key's TTL

    guessed = await link_token(served, ALICE)
    link_id, _, secret = guessed.partition(".")
    assert await login(f"{link_id}.{secret[::-1]}") == 403
    assert await login(guessed) == 403  # seen by someone with the wrong secret: burnt

    assert await sign_in_refusals(served) == ["link not valid"] * 5


async def test_sign_in_attempts_are_limited_per_client(served: Harness) -> None:
    statuses = [
        (await request(served, "GET", f"/console/login?token=guess{n}.secret")).status
        for n in range(11)
    ]
    assert statuses == [403] * 10 + [429]
    good = await link_token(served, ALICE)
    assert (await request(served, "GET", f"/console/login?token={good}")).status == 429
    assert (await request(served, "GET", f"/console/login?token={good}")).status == 429
    # The throttled attempts are audited once a minute, not each time.
    assert (await sign_in_refusals(served))[-2:] == ["link not valid", "too many attempts"]


# -- Sessions -----------------------------------------------------------------------------------


async def clawgate_console(
    served: Harness, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """`clawgate console <args>` as an operator runs it against the harness's Redis (its
    REDIS_URL and prefix), in-process: its exit code and what it printed."""
    parsed = build_parser().parse_args(["console", *args])
    capsys.readouterr()
    code = await asyncio.to_thread(run_console_command, served.settings, parsed)
    return code, capsys.readouterr().out


async def test_sessions_are_listed_and_revoked_from_the_command_line(
    served: Harness, page: Page, capsys: pytest.CaptureFixture[str]
) -> None:
    await page.goto(served.url(f"/console/login?token={await link_token(served, APPROVER)}"))
    await page.wait_for_url(re.compile(r"/console/$"))
    await page.wait_for_selector("body[data-live-open]")
    alice = await signed_in(served, ALICE)
    admin = await signed_in(served, ADMIN)

    code, out = await clawgate_console(served, capsys, "sessions", "list", "--json")
    assert code == 0, out
    listed = {s["actor"]["user_id"]: s["id"] for s in json.loads(out)}
    assert set(listed) == {APPROVER, ALICE, ADMIN}
    assert all("csrf" not in s for s in json.loads(out))

    code, out = await clawgate_console(served, capsys, "sessions", "revoke", listed[APPROVER][:5])
    assert code == 1, out  # fewer than 6 characters name no session
    code, out = await clawgate_console(served, capsys, "sessions", "revoke", listed[APPROVER])
    assert code == 0 and "1 session(s) ended" in out
    ended = await page.goto(served.url("/console/"))
    assert ended is not None and ended.status == 401

    code, out = await clawgate_console(served, capsys, "sessions", "revoke", f"slack:{ALICE}")
    assert code == 0 and "1 session(s) ended" in out
    assert (await request(served, "GET", "/console/", cookie=alice.cookie)).status == 401
    assert (await request(served, "GET", "/console/", cookie=admin.cookie)).status == 200
    revoked = [
        e
        async for e in served.service.runtime.audit.since(0)
        if e.event == "console_session_revoked"
    ]
    assert len(revoked) == 2


async def test_a_revoked_session_loses_its_live_updates_and_an_idle_one_ends(
    served: Harness,
) -> None:
    import aiohttp  # noqa: PLC0415

    carol = await signed_in(served, APPROVER)
    access = served.service.runtime.sign_in
    assert access is not None
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            served.url("/console/events"), headers={"Cookie": f"{COOKIE}={carol.cookie}"}
        ) as events,
    ):
        assert events.status == 200
        await access.revoke(f"slack:{APPROVER}")
        await served.service.runtime.audit.record("approval_probe", "slack:U_NOBODY")
        async with asyncio.timeout(5):
            body = await events.content.read()  # the stream ends
        assert b"event: change" not in body
    again = await request(served, "GET", "/console/events", cookie=carol.cookie)
    assert again.status == 401  # and the browser's reconnection is refused

    idle = await signed_in(served, ALICE)
    keys = Keys(served.prefix)
    session = await access.session(idle.cookie)
    assert session is not None
    await served.redis.pexpire(keys.console_session(session.id), 1)  # an hour unused
    await asyncio.sleep(0.01)
    assert (await request(served, "GET", "/console/", cookie=idle.cookie)).status == 401
