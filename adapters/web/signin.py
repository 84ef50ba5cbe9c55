"""Signing in with a one-time link, and out.

`GET /console/login?token=…` redeems the link (once; attempts per address are limited),
starts a new session (ending the one the browser sent, if any), sets its cookie (HttpOnly,
SameSite=Strict, Secure over https, path /console/) and redirects to `/console/welcome`, a
page that needs no session and moves on to the inbox by itself. That step is why a link
clicked in Slack works: a SameSite=Strict cookie is not sent on a redirect that began on
another site, but it is on a navigation the console's own page starts. Where the browser
goes next is never taken from the request (no open redirect)."""

from __future__ import annotations

import hmac

from aiohttp import web

from adapters.web.context import CONSOLE
from adapters.web.render import message, render

COOKIE = "clawgate_console"
PUBLIC = frozenset({"login", "welcome", "static"})  # routes that need no session
HOW_TO_SIGN_IN = (
    "Sign in with a link from the chat: type /clawgate console in Slack or Feishu (or ask an "
    "operator for `clawgate console link --as slack:U…`). A link works once, for 10 minutes."
)
NOT_VALID = (
    "This sign-in link does not work: it was used already, it expired (links last 10 "
    "minutes), or it was copied incompletely. Ask for a new one with /clawgate console."
)


def same(given: str, expected: str) -> bool:
    """Token comparison in constant time."""
    return hmac.compare_digest(given.encode(), expected.encode())


def add_routes(app: web.Application) -> None:
    app.router.add_get("/login", login, name="login")
    app.router.add_get("/welcome", welcome, name="welcome")
    app.router.add_post("/logout", logout, name="logout")


def client_of(request: web.Request) -> str:
    return request.remote or "?"


async def login(request: web.Request) -> web.StreamResponse:
    console = request.app[CONSOLE]
    audit = console.runtime.audit
    client = client_of(request)
    if not await console.access.may_try(client):
        # Said once a minute: refusals someone causes at will must not flood the audit trail.
        if await console.access.tally(client, "throttled") == 1:
            why = "too many attempts"
            await audit.record("console_sign_in_refused", "", why=why, client=client)
        return message(request, "Slow down", "Too many failed sign-ins; wait a minute.", 429)
    actor = await console.access.redeem(request.query.get("token", ""))
    if actor is None:  # at most ATTEMPTS_PER_MINUTE of these a minute per address
        await console.access.tally(client, "failed")
        await audit.record("console_sign_in_refused", "", why="link not valid", client=client)
        return message(request, "Sign-in link not valid", NOT_VALID, 403)
    replaced = await console.access.session(request.cookies.get(COOKIE, ""))
    if replaced is not None:  # one browser, one session: the one it had ends
        await console.access.end(replaced.id)
    cookie, session = await console.access.open_session(actor, client)
    await audit.record("console_signed_in", actor.key, session=session.short_id, client=client)
    response = web.HTTPSeeOther("/console/welcome")
    response.set_cookie(
        COOKIE,
        cookie,
        path="/console/",
        httponly=True,
        samesite="Strict",
        secure=console.secure,
    )
    raise response


async def welcome(request: web.Request) -> web.StreamResponse:
    return render(request, "welcome.html", title="Signing in")


async def logout(request: web.Request) -> web.StreamResponse:
    console = request.app[CONSOLE]
    cookie = request.cookies.get(COOKIE, "")
    session = await console.access.session(cookie)
    if session is not None:
        await console.access.end(session.id)
        await console.runtime.audit.record("console_signed_out", session.actor.key)
    response = message(request, "Signed out", "You are signed out of the console.", 200)
    response.del_cookie(COOKIE, path="/console/")
    return response
