"""The approvals inbox, one approval's page, and deciding from the browser.

The inbox lists the open approvals the signed-in person may decide (runtime/approval/desk.py),
oldest first, filterable; a batch's calls stand together under the batch, decidable one by
one or all at once. A decision is checked here (known, still pending, theirs to make: a
refusal is audited), then queued for the workers exactly as `clawgate approvals approve`
queues it (runtime/queue/remote.py): a worker of the conversation carries it out, the thread
gets the answer and every notice is updated. The page waits a moment for the worker's first
word, so a refusal shows at once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

from aiohttp import web

from adapters.web.context import CONSOLE
from adapters.web.filters import choices, matches
from adapters.web.render import SESSION, message, render
from runtime.approval.decisions import audit_refusal
from runtime.approval.desk import DeskItem
from runtime.approval.grants import GrantScope, parse_duration
from runtime.approval.notices import shown_fields
from runtime.queue.inbound import DecisionRequest
from runtime.queue.ingest import IngestUnavailable
from runtime.queue.remote import decision_request, send_decision
from runtime.redact import redact_text

CHOICES = ("approve", "approve_always", "reject")
SCOPES: tuple[GrantScope, ...] = ("here", "thread", "everywhere")
DURATIONS = ("", "30m", "2h", "7d")
FILTERS = ("conversation", "tool", "requester", "status")
FIRST_REPLY_S = 5.0  # how long the page waits for the worker to record the decision


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", inbox, name="inbox")
    app.router.add_get("/approvals/{id}", approval, name="approval")
    app.router.add_post("/approvals/{id}/decide", decide, name="decide")


@dataclass(frozen=True, slots=True)
class Group:
    """An approval alone, or a batch: the calls of one model turn, decidable together."""

    batch: str
    items: list[DeskItem]


def _groups(items: list[DeskItem]) -> list[Group]:
    groups: dict[str, Group] = {}
    for item in items:
        batch = item.notice.batch
        key = batch or item.record.id
        groups.setdefault(key, Group(batch, [])).items.append(item)
    for group in groups.values():  # a batch's calls in the model's order
        group.items.sort(key=lambda item: _position(item.checkpoint.batch, item.record.id))
    return list(groups.values())


def _position(batch: list[str], approval_id: str) -> int:
    return batch.index(approval_id) if approval_id in batch else len(batch)


def _facts(item: DeskItem) -> dict[str, str]:
    return {
        "conversation": item.record.conversation.id,
        "tool": item.record.tool,
        "requester": item.record.requester.key,
        "status": item.record.status.value,
    }


async def inbox(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    items = await console.desk.open_items(session.actor)
    wanted = {name: request.query.get(name, "") for name in FILTERS}
    options = {**choices(map(_facts, items), FILTERS), "status": ["pending", "executing"]}
    shown = [item for item in items if matches(_facts(item), wanted)]
    return render(
        request,
        "inbox.html",
        title="Inbox",
        groups=_groups(shown),
        total=len(items),
        wanted=wanted,
        options=options,
        scopes=SCOPES,
        durations=DURATIONS,
    )


def _edit_diff(item: DeskItem) -> list[str]:
    """The arguments as an approver edited them, against the model's, line by line."""
    if not item.checkpoint.edit:
        return []
    return [redact_text(line) for line in item.checkpoint.edit.splitlines()]


def _arguments(item: DeskItem) -> str:
    text = cast(str, shown_fields(item.record)["arguments"])
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except json.JSONDecodeError:
        return text


async def approval(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    found = await console.desk.item(session.actor, request.match_info["id"])
    if isinstance(found, str):
        return message(request, "Not found", found[0].upper() + found[1:] + ".", 404)
    record = found.record
    trail = await console.runtime.wing.trail(record)
    notices = [(record.conversation.id, record.notice)]
    notices += [(copy.get("conversation", "?"), copy) for copy in record.copies]
    return render(
        request,
        "approval.html",
        title=f"Approval {record.id}",
        item=found,
        fields=shown_fields(record),
        arguments=_arguments(found),
        diff=_edit_diff(found),
        notices=[(where, ref) for where, ref in notices if ref],
        trail=[{k: redact_text(v) for k, v in entry.items()} for entry in trail],
        scopes=SCOPES,
        durations=DURATIONS,
    )


def _decision(form: dict[str, str]) -> DecisionRequest | str:
    """The decision a form asks for, or what is wrong with it."""
    choice = form.get("decision", "")
    if choice not in CHOICES:
        return f"unknown decision {choice[:40]!r}"
    approve = choice != "reject"
    edit = form.get("edit", "").strip() or None
    if edit is not None and (not approve or choice == "approve_always"):
        return "an edited call is approved once"
    scope = form.get("scope", "here")
    if scope not in SCOPES:
        return f"unknown scope {scope[:40]!r}"
    seconds = None
    if form.get("duration"):
        try:
            seconds = parse_duration(form["duration"])
        except ValueError as exc:
            return str(exc)
    reason = None if approve else form.get("reason", "").strip()[:500] or None
    request = decision_request(approve, reason, always=choice == "approve_always", edit=edit)
    return request.model_copy(update={"scope": scope, "seconds": seconds, "console": True})


async def decide(request: web.Request) -> web.StreamResponse:
    console, session = request.app[CONSOLE], request[SESSION]
    actor, audit = session.actor, console.runtime.audit
    form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
    wanted = _decision(form)
    if isinstance(wanted, str):
        return message(request, "Not decided", f"Not decided: {wanted}.", 400)
    attempt = "edit" if wanted.edit else "approve" if wanted.approve else "reject"
    approval_id = request.match_info["id"]
    unseen = f"Not decided: no approval {approval_id[:40]!r} that you may see."
    checked = await console.runtime.wing.decidable(approval_id, actor, attempt)
    if isinstance(checked, str):  # unknown, decided already: said only to who may see it
        if isinstance(await console.desk.item(actor, approval_id), str):
            return message(request, "Not decided", unseen, 404)
        return message(request, "Not decided", f"Not decided: {checked}.", 409)
    refusal = await console.desk.refusal(actor, checked)
    if refusal is not None:  # audited as the chat's are; answered as an unknown id is
        await audit_refusal(audit, checked.id, actor, "unauthorized", refusal, checked, attempt)
        return message(request, "Not decided", unseen, 404)
    try:
        await send_decision(console.ingest, checked, actor, wanted)
    except IngestUnavailable:
        text = "Cannot reach Redis, so nothing was decided; try again shortly."
        return message(request, "Not decided", text, 503)
    reply = None
    if not console.waits.locked():  # a few wait at once: each holds a Redis connection
        async with console.waits:
            reply = await console.replies.pop(wanted.reply, FIRST_REPLY_S)
    if reply is not None and reply.step == "refused":
        return message(request, "Not decided", reply.text, 409)
    batch = await console.runtime.wing.load(checked.id) is None  # a batch's id: no page
    raise web.HTTPSeeOther("/console/" if batch else f"/console/approvals/{checked.id}")
