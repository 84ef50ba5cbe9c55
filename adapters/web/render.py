"""Pages from templates: Jinja2 with autoescape on for every template (a tool's arguments, a
reason, a person's name or a thread's text is data, never markup), and the filters the pages
share. Text that may quote a call is redacted before it gets here (runtime/redact.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web

from runtime.approval.stats import wait_text
from runtime.web_access import ConsoleSession

SESSION = web.RequestKey("console_session", ConsoleSession)
IS_ADMIN = web.RequestKey("console_admin", bool)

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("adapters.web", "templates"),
    autoescape=True,  # every template, whatever its name
    undefined=jinja2.StrictUndefined,  # a misspelt field fails the test, not the page silently
    trim_blocks=True,
    lstrip_blocks=True,
)


def when(ms: int | float | None) -> str:
    """A time in ms since the epoch, in UTC."""
    if not ms:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):  # a stored time no calendar has
        return f"{ms:.0f} ms"


def ago(ms: int | float | None) -> str:
    """How long ago (or, negative, how long until) a time in ms since the epoch."""
    if not ms:
        return "-"
    seconds = time.time() - ms / 1000
    later = seconds < 0
    seconds = abs(seconds)
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "min")):
        if seconds >= size:
            text = f"{seconds / size:.0f} {unit}"
            break
    else:
        text = f"{seconds:.0f} s"
    return f"in {text}" if later else text


def span(seconds: float | None) -> str:
    """A duration in seconds as people say it: `0.4 s`, `40 s`, `3 min`."""
    return "-" if seconds is None else wait_text(seconds * 1000)


_ENV.filters["when"] = when
_ENV.filters["ago"] = ago
_ENV.filters["span"] = span


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    """The page `template` for `request`, with the signed-in person and their CSRF token."""
    session = request.get(SESSION)
    page = _ENV.get_template(template).render(
        session=session,
        csrf=session.csrf if session is not None else "",
        is_admin=request.get(IS_ADMIN, False),
        path=request.path,
        # What a form's POST answered: its address takes no GET, so the page is not fetched
        # again on a change (console.js); the person goes on from its links.
        posted=request.method != "GET",
        **context,
    )
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


def message(request: web.Request, title: str, text: str, status: int) -> web.Response:
    """A page that only says something (a refusal, a sign-in that did not work)."""
    return render(request, "message.html", status=status, title=title, text=text)
