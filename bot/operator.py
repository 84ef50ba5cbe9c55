"""`clawgate approvals list|show|approve|reject`: the operator's view, straight from Redis.

Decisions made here are recorded as `operator:<login>` and may come from outside the
originating conversation; the resumed run's output is printed here."""

from __future__ import annotations

import argparse
import getpass
from typing import TextIO

from adapters.console.channel import render_pending
from runtime.agent import Runtime
from runtime.models import Actor


async def run_approvals_command(runtime: Runtime, args: argparse.Namespace, out: TextIO) -> int:
    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    operator = Actor(platform="operator", user_id=getpass.getuser())
    if args.verb == "list":
        notices = await runtime.pending()
        say("\n".join(map(render_pending, notices)) or "No open approvals.")
        return 0
    if args.verb == "show":
        loaded = await runtime.approvals.load(args.id)
        if loaded is None:
            say(f"unknown approval id {args.id!r}")
            return 1
        record, checkpoint = loaded
        say(record.model_dump_json(indent=2))
        if checkpoint.trace_id:
            say(f"trace: {checkpoint.trace_id} (clawgate trace show {checkpoint.trace_id})")
        for entry in await runtime.approvals.audit_entries(record.session):
            if entry.get("approval") == record.id:
                say("audit: " + " ".join(f"{k}={v}" for k, v in entry.items()))
        return 0
    approve = args.verb == "approve"
    decision = await runtime.decide(
        args.id,
        approve,
        operator,
        None,
        reason=" ".join(args.reason) if not approve else None,
        always=approve and args.always,
    )
    say(decision.message)
    return 0 if decision.accepted else 1
