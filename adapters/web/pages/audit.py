"""The Audit page: the global audit trail (runtime/audit.py) searched by time (`since`, `until`:
`2h`, `7d` back from now, or an ISO date or time in UTC), conversation, actor, tool and event
(runtime/audit_search.py, as `clawgate audit tail` reads it), newest first, a page at a time
with a link to the older ones.

Only what the signed-in person oversees is listed: an entry of a conversation when they oversee
it (runtime/approval/desk.py: `Oversight`), an entry of none (a policy reload, an operator's
act) when they are an admin of every conversation. Every value is redacted before it is shown.
`chain`: whether the entries shown verify among themselves (their MACs, and the links between
those next to each other in the chain: runtime/audit_verify.py `page_check`), in a line; None
when none shown is chained. The whole chain is for `clawgate audit verify`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC
from urllib.parse import urlencode

from aiohttp import web

from adapters.web.context import CONSOLE
from adapters.web.render import SESSION, render
from runtime.audit import AuditEntry
from runtime.audit_search import AuditQuery, parse_moment, search
from runtime.redact import redact_text

FILTERS = ("since", "until", "conversation", "actor", "tool", "event")
PAGE = 100
_ID = re.compile(r"\d{1,20}-\d{1,20}")  # a stream entry's id


def entry_id(text: str) -> bool:
    """Whether `text` is a stream entry's id Redis takes (two numbers under 2**64)."""
    return bool(_ID.fullmatch(text)) and all(int(n) < 2**64 for n in text.split("-"))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/audit", audit, name="audit")


@dataclass(frozen=True, slots=True)
class Row:
    """One entry as shown: every value redacted (they may quote a call or a path)."""

    id: str
    at: int
    event: str
    actor: str
    conversation: str
    tool: str
    trace: str
    details: list[tuple[str, str]]


def shown_row(entry: AuditEntry) -> Row:
    fields = entry.fields
    rest = [(k, redact_text(v)) for k, v in fields.items() if k not in ("conversation", "tool")]
    return Row(
        id=entry.id,
        at=entry.at,
        event=redact_text(entry.event),
        actor=redact_text(entry.actor),
        conversation=redact_text(fields.get("conversation", "")),
        tool=redact_text(fields.get("tool", "")),
        trace=redact_text(entry.trace),
        details=rest,
    )


def audit_query(wanted: dict[str, str], now: float | None = None) -> AuditQuery | str:
    """The query the page's filters ask for, or what is wrong with them."""
    moments: dict[str, int | None] = {}
    for name in ("since", "until"):
        try:
            moments[name] = parse_moment(wanted[name], now, UTC) if wanted[name] else None
        except ValueError as exc:
            return f"{name}: {exc}"
    return AuditQuery(
        since_ms=moments["since"],
        until_ms=moments["until"],
        conversation=wanted["conversation"],
        actor=wanted["actor"],
        tool=wanted["tool"],
        event=wanted["event"],
    )


async def audit(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    wanted = {name: request.query.get(name, "").strip()[:200] for name in FILTERS}
    before = request.query.get("before", "")
    query = audit_query(wanted)
    if before and not entry_id(before):
        query = "before: not an entry id"
    rows: list[Row] = []
    older, chain = None, None
    if isinstance(query, AuditQuery):
        oversight = console.desk.oversight(session.actor)

        async def visible(entry: AuditEntry) -> bool:
            return await oversight.oversees(entry.fields.get("conversation"))

        audit_log = console.runtime.audit
        page = await search(audit_log, query, visible, before=before or None, count=PAGE)
        rows = [shown_row(e) for e in page.entries]
        chain = audit_log.check_shown(page.entries) or None
        if page.older is not None:
            older = urlencode({**{k: v for k, v in wanted.items() if v}, "before": page.older})
    return render(
        request,
        "audit.html",
        status=400 if isinstance(query, str) else 200,
        title="Audit",
        rows=rows,
        older=older,
        wanted=wanted,
        problem=query if isinstance(query, str) else None,
        chain=chain,
    )
