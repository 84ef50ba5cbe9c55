"""`clawgate console link --as slack:U…` and `clawgate console sessions list|revoke`: the
operator's side of the web console's sign-in (runtime/web_access.py). A link is for one
person's chat identity and works once, for 10 minutes; it names CLAWGATE_PUBLIC_URL. Needs
only REDIS_URL (the serve processes read the same Redis)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from datetime import UTC, datetime
from typing import TextIO

from bot.settings import Settings, SettingsError
from bot.tables import print_table
from runtime.audit import AuditLog
from runtime.models import Actor
from runtime.policy.approvers import OPERATOR_PLATFORM
from runtime.store.connection import connect
from runtime.store.keys import Keys
from runtime.web_access import WebAccess

CHAT_PLATFORMS = ("slack", "feishu")  # a console session is a chat identity's


def _person(text: str) -> Actor:
    platform, _, user = text.partition(":")
    if platform not in CHAT_PLATFORMS or not user or ":" in user or any(c.isspace() for c in text):
        raise SettingsError(
            f"--as: expected a chat identity like slack:U123 or feishu:ou_abc, not {text!r}"
        )
    return Actor(platform=platform, user_id=user)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def run_console_command(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.redis_url:
        raise SettingsError("REDIS_URL: required for `clawgate console` (sessions live there)")
    return asyncio.run(_run(settings, args, sys.stdout))


async def _run(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    keys = Keys(settings.redis_prefix)
    access = WebAccess(redis, keys, settings.console_url)
    audit = AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
    operator = f"{OPERATOR_PLATFORM}:{getpass.getuser()}"
    try:
        if args.verb == "link":
            person = _person(args.person)
            out.write(await access.link(person) + "\n")
            await audit.record("console_link_issued", operator, person=person.key)
            return 0
        if args.action == "revoke":
            ended = await access.revoke(args.what)
            for session in ended:
                await audit.record("console_session_revoked", operator, session=session.short_id)
            out.write(f"{len(ended)} session(s) ended.\n")
            return 0 if ended else 1
        sessions = await access.sessions()
        if args.json:
            shown = [
                {"id": s.short_id} | s.model_dump(mode="json", exclude={"id", "csrf"})
                for s in sessions
            ]
            out.write(json.dumps(shown, indent=2) + "\n")
        elif sessions:
            columns = ("ID", "PERSON", "SIGNED IN (UTC)", "ENDS BY (UTC)", "FROM")
            table = [
                (s.short_id, s.actor.key, _when(s.created_at), _when(s.expires_at), s.client)
                for s in sessions
            ]
            print_table(columns, table, out)
        else:
            out.write("No console sessions.\n")
        return 0
    finally:
        await redis.aclose()
