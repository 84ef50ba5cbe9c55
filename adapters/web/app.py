"""The console's aiohttp application (mounted by `clawgate serve` under /console/) and what
every request goes through: the security headers, the session, and the CSRF check.

- Headers: a strict Content-Security-Policy (scripts and styles from /console/static/ only,
  no inline code, `frame-ancestors 'none'`), no caching, a referrer only to the console
  itself (never to another site; with none at all, browsers send `Origin: null` on forms).
- Session: every page but sign-in and the static files needs one (`runtime/web_access.py`);
  without it the page says how to get a link.
- CSRF: a state-changing request (any POST) carries the session's token as the `csrf` form
  field and, when the browser sends an Origin, comes from this console's origin. A refused
  POST is audited (`console_refused`) with who it claimed to be."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from adapters.web import signin
from adapters.web.context import CONSOLE, Console, Health
from adapters.web.live import Changes
from adapters.web.pages import audit, grants, inbox, insight, policy, runs
from adapters.web.pages import health as health_page
from adapters.web.render import IS_ADMIN, SESSION, message
from runtime.agent import Runtime
from runtime.queue.ingest import Ingest
from runtime.web_access import ConsoleSession, WebAccess

STATIC = Path(__file__).parent / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}
REFRESH_HEADER = "X-Clawgate-Refresh"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def console_app(
    runtime: Runtime, access: WebAccess, ingest: Ingest, health: Health | None = None
) -> web.Application:
    """`health`: what the Health page shows, gathered by the serving process."""
    console = Console(runtime, access, ingest, Changes(runtime.audit), health)
    app = web.Application(middlewares=[_signed_in])
    app[CONSOLE] = console
    # On every response, whatever made it: a page, a refusal, a 404, a file, the event
    # stream (which sends its headers before its handler returns).
    app.on_response_prepare.append(_headers)
    signin.add_routes(app)
    inbox.add_routes(app)
    health_page.add_routes(app)
    insight.add_routes(app)
    policy.add_routes(app)
    runs.add_routes(app)
    grants.add_routes(app)
    audit.add_routes(app)
    app.router.add_get("/events", _events, name="events")
    app.router.add_static("/static/", STATIC, name="static")
    app.on_shutdown.append(lambda _: console.changes.close())
    return app


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(HEADERS)
    if request.match_info.route.name == "static" and response.status == 200:
        response.headers["Cache-Control"] = "private, max-age=300"


async def _events(request: web.Request) -> web.StreamResponse:
    """The live changes, for as long as the session lives: a revoked or expired session's
    stream ends (its idle expiry is not renewed by watching)."""
    console, session = request.app[CONSOLE], request[SESSION]
    return await console.changes.stream(request, lambda: console.access.alive(session))


@web.middleware
async def _signed_in(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.match_info.route.name in signin.PUBLIC:
        return await handler(request)
    console = request.app[CONSOLE]
    # A page fetching itself after a change (console.js) keeps no idle session alive.
    renew = request.headers.get(REFRESH_HEADER) != "1"
    session = await console.access.session(request.cookies.get(signin.COOKIE, ""), renew)
    if request.method == "POST":
        problem = await _forged(request, console, session)
        if problem is not None:
            await _audit_refused(request, console, session, problem)
            return message(request, "Refused", f"This request was refused: {problem}.", 403)
    if session is None:
        return message(request, "Sign in", signin.HOW_TO_SIGN_IN, 401)
    request[SESSION] = session
    request[IS_ADMIN] = console.desk.is_global_admin(session.actor)
    return await handler(request)


async def _audit_refused(
    request: web.Request, console: Console, session: ConsoleSession | None, problem: str
) -> None:
    """A refused post is audited with who it claimed to be; one without a session once a
    minute per address (anyone can send those, as many as they like)."""
    if session is None and await console.access.tally(signin.client_of(request), "anon") > 1:
        return
    actor = session.actor.key if session is not None else ""
    await console.runtime.audit.record("console_refused", actor, why=problem, path=request.path)


async def _forged(
    request: web.Request, console: Console, session: ConsoleSession | None
) -> str | None:
    """Why a POST is not this session's own (None when it is)."""
    if session is None:
        return "not signed in"
    origin = request.headers.get("Origin")
    if origin is not None and origin not in _origins(request, console):
        return f"it came from another site ({origin[:80]})"
    form = await request.post()
    token = form.get("csrf")
    if not isinstance(token, str) or not signin.same(token, session.csrf):
        return "its form token is missing or not this session's"
    return None


def _origins(request: web.Request, console: Console) -> set[str]:
    public = urlsplit(console.access.public_url)
    return {f"{public.scheme}://{public.netloc}", f"{request.scheme}://{request.host}"}
