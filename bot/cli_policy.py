"""`clawgate policy show|allow|deny|reset [--conversation REF] [--json]`: the operator's view
of the layered policy. Without --conversation, `show` prints the global policy and changes
apply to every conversation; a REF is a conversation id or a prefix of one (`slack:T123`).
Changes are made as `operator:<login>`, an admin, and recorded in the audit trail.
`clawgate policy grants [--json]` and `revoke <grant>`: the grants "approve always" left."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from typing import TextIO

from adapters.policy_text import as_json, render_grant, render_policy
from bot.settings import Settings, SettingsError
from bot.wiring import build_policies, load_policy
from runtime.approval.grants import GrantStore, revoke_grant
from runtime.audit import AuditLog
from runtime.models import Actor
from runtime.policy.model import GLOBAL, check_scope, override_state
from runtime.policy.service import PolicyChangeError, PolicyUsageError
from runtime.store.connection import connect
from runtime.store.keys import Keys


def run_policy_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.verb != "show" and not settings.redis_url:
        raise SettingsError("REDIS_URL: required (overrides and grants live there)")
    if args.verb in ("grants", "revoke"):
        return asyncio.run(_grants(settings, args, sys.stdout))
    try:
        args.conversation = GLOBAL if args.conversation is None else args.conversation
        check_scope(args.conversation)
    except ValueError as exc:
        print(f"clawgate: --conversation: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_run(settings, args, sys.stdout))


async def _run(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    document = load_policy(settings)
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    keys = Keys(settings.redis_prefix)
    audit = AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
    policies = build_policies(settings, document, redis, audit)
    scope: str = args.conversation
    try:
        if args.verb == "show":
            effective = await policies.effective(scope)
            out.write((as_json(effective) if args.json else render_policy(effective)) + "\n")
            if not settings.redis_url:
                print(
                    "clawgate: REDIS_URL is not set: this is the file's policy; admins' "
                    "overrides live in Redis and are not shown",
                    file=sys.stderr,
                )
            return 0
        operator = Actor(platform="operator", user_id=getpass.getuser())
        state = override_state(args.verb)
        message = await policies.change(scope, args.tool, state, operator)
        if args.json:
            verdict = (await policies.effective(scope)).verdict(args.tool)
            message = json.dumps(
                {
                    "scope": scope or "global",
                    "tool": args.tool,
                    "state": verdict.state,
                    "source": verdict.source,
                    "message": message,
                }
            )
        out.write(message + "\n")
        return 0
    except PolicyUsageError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 2
    except PolicyChangeError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 1
    finally:
        await redis.aclose()


async def _grants(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    keys = Keys(settings.redis_prefix)
    store = GrantStore(redis, keys)
    try:
        grants = await store.all()
        if args.verb == "grants":
            if args.json:
                rows = [{"id": g.id, **g.model_dump()} for g in grants]
                out.write(json.dumps(rows, indent=2) + "\n")
            else:
                out.write("".join(render_grant(g) + "\n" for g in grants) or "No grants.\n")
            return 0
        found = next((g for g in grants if g.id == args.grant), None)
        if found is None:
            print(f"clawgate: no grant {args.grant} (see clawgate policy grants)", file=sys.stderr)
            return 1
        operator = f"operator:{getpass.getuser()}"
        audit = AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
        await revoke_grant(store, audit, found, operator, admin=True)  # the operator may
        out.write(f"Grant {found.id} revoked: `{found.shown}` asks again from the next call on.\n")
        return 0
    finally:
        await redis.aclose()
