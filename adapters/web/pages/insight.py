"""The Insight page: how approval requests went over the last 7, 30 or 90 days (read from the
audit trail, runtime/approval/stats.py) as three plots drawn on the server (adapters/web/
charts.py) and the "approve always?" suggestions. Admins of every conversation see them all;
anyone else the conversations they oversee (as an admin or approver there)."""

from __future__ import annotations

import time

from aiohttp import web
from markupsafe import Markup

from adapters.web.charts import insight_svgs
from adapters.web.context import CONSOLE
from adapters.web.render import SESSION, render
from runtime.approval.stats import (
    DAY_MS,
    SUGGEST_MIN_APPROVED,
    approval_stats,
    policy_grantable,
)
from runtime.redact import visible

PERIODS = (7, 30, 90)  # days


def add_routes(app: web.Application) -> None:
    app.router.add_get("/insight", insight, name="insight")


async def insight(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    days = PERIODS[0]
    if request.query.get("days", "").isdigit() and int(request.query["days"]) in PERIODS:
        days = int(request.query["days"])
    since_ms = int(time.time() * 1000) - days * DAY_MS
    oversight = console.desk.oversight(session.actor)
    stats = await approval_stats(
        console.runtime.audit,
        since_ms,
        grantable=policy_grantable(console.runtime.policies),
        visible=oversight.oversees,
    )
    # charts.py escapes every text it draws from data: its markup is the one exception to
    # autoescape, and nothing else on this page is marked safe.
    charts = {name: Markup(svg) for name, svg in insight_svgs(stats).items()}  # noqa: S704
    return render(
        request,
        "insight.html",
        title="Insight",
        days=days,
        periods=PERIODS,
        requests=stats.requests,
        conversations=len(stats.by_conversation),
        charts=charts,
        suggestions=[visible(s.text) for s in stats.suggestions],
        suggest_min=SUGGEST_MIN_APPROVED,
        everything=oversight.admin,
    )
