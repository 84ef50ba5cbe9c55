"""The Health page (global admins only): what `doctor` and /readyz know, as the serving process
sees it (runtime/health.py: `HealthReport`, gathered by bot/health_facts.py): this process,
what keeps it from being ready and what is degraded, every worker with its liveness (one
killed shows as gone once its mark lapses), each inbox partition's depth and lag, the Redis
servers, the MCP servers and whether the model answers. The page asks again every few
seconds by itself (`data-poll` on its <main>, static/console.js): a worker's death changes no
audit entry, so the live changes would not show it."""

from __future__ import annotations

from aiohttp import web

from adapters.web.context import CONSOLE
from adapters.web.render import IS_ADMIN, message, render
from runtime.mcp.state import ServerState

POLL_S = 5  # how often an open page asks again


def add_routes(app: web.Application) -> None:
    app.router.add_get("/health", health, name="health")


def mcp_class(server: ServerState) -> str:
    """A server's state as a colour: up is fine, starting or stopped is to watch."""
    return {"up": "ok", "down": "bad"}.get(server.state, "warn")


async def health(request: web.Request) -> web.StreamResponse:
    if not request[IS_ADMIN]:
        return message(request, "Not allowed", "The Health page is for admins.", 403)
    gather = request.app[CONSOLE].health
    if gather is None:
        text = "This process does not gather health facts; see /readyz and `clawgate doctor`."
        return message(request, "Health", text, 503)
    report = await gather()
    # Redis's durability warnings are shown with its servers, not twice.
    shown_with_redis = report.queue.redis.warnings if report.queue is not None else []
    return render(
        request,
        "health.html",
        title="Health",
        report=report,
        warnings=[w for w in report.warnings if w not in shown_with_redis],
        mcp=[(server, mcp_class(server)) for server in report.mcp],
        poll=POLL_S,
    )
