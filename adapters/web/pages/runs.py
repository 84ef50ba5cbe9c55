"""Runs: the recent runs of each conversation the person oversees, and one run's decision tree.

The list is read from the audit trail (runtime/run_trail.py), so it works whether tracing is on
or not; with tracing on each run also says how it stopped (its trace's root span). One run's
page draws its trace as `clawgate trace show` does (runtime/tracing/tree.py), as nested lists:
the pause at an approval links the approval, and the run that resumed it hangs beneath. Without
a trace (tracing off, or older than its TTL) the page shows what the audit trail has.

Who may see a run: whoever oversees its conversation (runtime/approval/desk.py), named by the
trace's root span or else by its audit entries; a run of no known conversation is the admins'.
Anything else reads as not found."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

from aiohttp import web

from adapters.web.context import CONSOLE, Console
from adapters.web.render import SESSION, message, render
from runtime.audit import AuditEntry
from runtime.redact import redact_text
from runtime.run_trail import RunTrail, by_conversation, runs
from runtime.tracing.store import UnreadableTrace
from runtime.tracing.tree import Linked, Node, collect, trace_headline, tree

SCAN = 2000  # the newest audit entries the runs are read from
PER_CONVERSATION = 10
TRACE_ID = re.compile(r"[0-9a-f]{1,64}")  # runtime/tracing/recorder.py makes them hex
SHOWN_FIELDS = ("tool", "status", "decision", "approval", "reason", "reasons", "name")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/runs", runs_page, name="runs")
    app.router.add_get("/runs/{trace_id}", run_page, name="run")


async def _overseen(request: web.Request, trails: list[RunTrail]) -> list[RunTrail]:
    oversight = request.app[CONSOLE].desk.oversight(request[SESSION].actor)
    return [t for t in trails if await oversight.oversees(t.conversation or None)]


async def _stopped(console: Console, trace_id: str) -> str:
    """How the run stopped, as its trace's root span says ("" without a trace)."""
    try:
        doc = await console.traces.load(trace_id)
    except UnreadableTrace:
        return "trace unreadable"
    return "" if doc is None else doc.root.status


async def runs_page(request: web.Request) -> web.StreamResponse:
    console = request.app[CONSOLE]
    mine = await _overseen(request, runs(await console.runtime.audit.newest(SCAN)))
    wanted = request.query.get("conversation", "")
    shown = [t for t in mine if not wanted or t.conversation == wanted]
    groups = by_conversation(shown, PER_CONVERSATION)
    listed = [t.trace for group in groups.values() for t in group]
    stopped: dict[str, str] = {}
    if console.runtime.tracer.enabled:
        found = await asyncio.gather(*(_stopped(console, t) for t in listed))
        stopped = dict(zip(listed, found, strict=True))
    return render(
        request,
        "runs.html",
        title="Runs",
        groups=groups,
        conversations=sorted({t.conversation for t in mine}),
        wanted=wanted,
        stopped=stopped,
        tracing=console.runtime.tracer.enabled,
    )


def _redacted(node: Node) -> Node:
    """The tree as shown: payloads are redacted when recorded; this covers the rest."""
    return replace(
        node,
        lines=[redact_text(line) for line in node.lines],
        children=[_redacted(child) for child in node.children],
    )


def _entry(entry: AuditEntry) -> dict[str, str]:
    shown = {k: redact_text(entry.fields[k]) for k in SHOWN_FIELDS if entry.fields.get(k)}
    return {"event": entry.event, "actor": redact_text(entry.actor), **shown}


def _conversation(linked: Linked | None, trail: RunTrail | None) -> str:
    named = linked.doc.root.attributes.get("conversation") if linked is not None else None
    if isinstance(named, str) and named:
        return named
    return trail.conversation if trail is not None else ""


async def run_page(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    trace_id = request.match_info["trace_id"].strip()
    if not TRACE_ID.fullmatch(trace_id):
        return message(request, "Not found", "No run by that id.", 404)
    unreadable = False
    try:
        linked = await collect(console.traces, trace_id)
    except UnreadableTrace:
        linked, unreadable = None, True
    trails = {t.trace: t for t in runs(await console.runtime.audit.newest(SCAN))}
    trail = trails.get(trace_id)
    known = linked is not None or trail is not None or unreadable
    overseen = await console.desk.oversight(session.actor).oversees(
        _conversation(linked, trail) or None
    )
    if not (known and overseen):  # an unknown run reads the same as one not theirs
        return message(request, "Not found", f"No run {trace_id!r} that you may see.", 404)
    if linked is not None:
        followed = linked.trace_ids()
    else:  # the runs that resumed it, as the audit trail links them
        followed = [trace_id, *(trail.resumed_by if trail is not None else [])]
    return render(
        request,
        "run.html",
        title=f"Run {trace_id}",
        trace_id=trace_id,
        trail=trail,
        headline=redact_text(trace_headline(linked.doc)) if linked is not None else "",
        resumes=[link.trace_id for link in linked.doc.links] if linked is not None else [],
        root=_redacted(tree(linked)) if linked is not None else None,
        unreadable=unreadable,
        tracing=console.runtime.tracer.enabled,
        entries=[
            (t, [(e.at, _entry(e)) for e in trails[t].entries]) for t in followed if t in trails
        ],
    )
