"""The Grants page: the live "approve always" rules (runtime/approval/grants.py) the signed-in
person oversees, filterable, each revocable by whom the chat lets revoke it.

Who sees a grant: whoever oversees the conversation it applies in (runtime/approval/desk.py:
`Oversight`), and its granter. A grant for everywhere belongs to no one conversation, so only
admins of every conversation (and its granter) see it, as only they may revoke it; a thread's
grant written before grants recorded their conversation is the same. Who may revoke one: as in
the chat (`revoke_grant`), admins where it applies or whoever granted it; a refusal says why
and is audited, as the revocation is."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from adapters.web.context import CONSOLE
from adapters.web.filters import choices, matches
from adapters.web.render import SESSION, message, render
from runtime.approval.desk import Oversight
from runtime.approval.grants import EVERYWHERE, Grant, revoke_grant
from runtime.redact import redact_text

FILTERS = ("conversation", "scope", "tool", "by")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/grants", grants, name="grants")
    app.router.add_post("/grants/{id}/revoke", revoke, name="revoke_grant")


@dataclass(frozen=True, slots=True)
class Row:
    """One grant as the page shows it: its rule redacted (it may quote a call)."""

    grant: Grant
    rule: str
    facts: dict[str, str]
    revocable: bool  # by this person (the button shows only then; the POST checks again)


def grant_facts(grant: Grant) -> dict[str, str]:
    """What a grant is filtered by: where it applies, how far it reaches, its tool, who."""
    scope = "thread" if grant.scope.startswith("thread:") else "conversation"
    return {
        "conversation": grant.applies_in or EVERYWHERE,
        "scope": EVERYWHERE if grant.scope == EVERYWHERE else scope,
        "tool": grant.tool,
        "by": grant.by,
    }


async def _sees(oversight: Oversight, grant: Grant) -> bool:
    return grant.by == oversight.actor.key or await oversight.oversees(grant.applies_in)


async def _may_revoke(oversight: Oversight, grant: Grant) -> bool:
    return grant.by == oversight.actor.key or await oversight.administers(grant.applies_in)


async def grants(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    oversight = console.desk.oversight(session.actor)
    rows = [
        Row(g, redact_text(g.shown), grant_facts(g), await _may_revoke(oversight, g))
        for g in await console.runtime.approvals.grants.all()
        if await _sees(oversight, g)
    ]
    wanted = {name: request.query.get(name, "") for name in FILTERS}
    return render(
        request,
        "grants.html",
        title="Grants",
        rows=[row for row in rows if matches(row.facts, wanted)],
        total=len(rows),
        wanted=wanted,
        options=choices((row.facts for row in rows), FILTERS),
    )


async def revoke(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    actor, store = session.actor, console.runtime.approvals.grants
    grant_id = request.match_info["id"]
    unknown = f"No live grant {grant_id[:40]!r} that you may see."
    found = next((g for g in await store.all() if g.id == grant_id), None)
    if found is None:  # gone already, or never was
        return message(request, "Not revoked", unknown, 404)
    oversight = console.desk.oversight(actor)
    admin = await oversight.administers(found.applies_in)
    refusal = await revoke_grant(store, console.runtime.audit, found, actor.key, admin=admin)
    if refusal is not None:  # audited; who may not see it is not told it exists
        if not await _sees(oversight, found):
            return message(request, "Not revoked", unknown, 404)
        return message(request, "Not revoked", f"Grant {found.id} not revoked: {refusal}.", 403)
    raise web.HTTPSeeOther("/console/grants")
