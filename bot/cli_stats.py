"""`clawgate approvals stats [--since 7d] [--conversation REF] [--json]`: how approval
requests went (runtime/approval/stats.py), from the audit trail in Redis. Three tables in a
terminal (per signature, per conversation, per UTC day) and the suggestions, or one JSON
object. Needs only REDIS_URL (and reads the policy file, to leave out suggestions the policy
would refuse)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import TextIO

from bot.cli_audit import UsageError, parse_since
from bot.settings import Settings, SettingsError
from bot.tables import hanging, print_table, terminal_width
from bot.wiring import build_policies, load_policy
from runtime.approval.stats import (
    SUGGEST_MIN_APPROVED,
    ApprovalStats,
    Tally,
    approval_stats,
    policy_grantable,
    ranked,
    wait_text,
)
from runtime.audit import AuditLog
from runtime.policy.model import check_scope
from runtime.store.connection import connect
from runtime.store.keys import Keys

COUNTS = ("ASKED", "APPROVED", "REJECTED", "EXPIRED", "WITHDRAWN", "REFUSED", "MEDIAN", "P90")


def _counts(tally: Tally) -> tuple[str, ...]:
    median, p90 = tally.median_ms, tally.p90_ms
    numbers = (tally.requests, tally.approved, tally.rejected, tally.expired, tally.withdrawn)
    return (
        *map(str, (*numbers, tally.refused)),
        "-" if median is None else wait_text(median),
        "-" if p90 is None else wait_text(p90),
    )


def _since(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def print_stats(stats: ApprovalStats, out: TextIO, as_json: bool, width: int | None = None) -> None:
    """`width`: of the terminal (default: the one `out` is, if any)."""
    width = width or terminal_width(out)
    if as_json:
        since = datetime.fromtimestamp(stats.since_ms / 1000, UTC).isoformat(timespec="seconds")
        out.write(json.dumps({"since": since, **stats.as_json()}, indent=2))
        out.write("\n")
        return
    where = f" in {stats.conversation}" if stats.conversation else ""
    if not stats.requests:
        out.write(f"No approval requests{where} since {_since(stats.since_ms)}.\n")
        return
    out.write(
        f"{stats.requests} approval request{'s' if stats.requests > 1 else ''}{where} since "
        f"{_since(stats.since_ms)}, in {len(stats.by_conversation)} conversation"
        f"{'s' if len(stats.by_conversation) > 1 else ''}.\n\n"
    )
    signatures = [(s.tool, *_counts(t), s.rule or "-") for s, t in ranked(stats.by_signature)]
    print_table(("TOOL", *COUNTS, "SIGNATURE"), signatures, out, width)
    out.write("\n")
    conversations = [(*_counts(t), c) for c, t in ranked(stats.by_conversation)]
    print_table((*COUNTS, "CONVERSATION"), conversations, out, width)
    out.write("\n")
    days = [(day.isoformat(), *_counts(t)) for day, t in stats.daily()]
    print_table(("DAY (UTC)", *COUNTS), days, out, width)
    if stats.suggestions:
        out.write(
            f"\nSuggestions (approved at least {SUGGEST_MIN_APPROVED} times in a conversation, "
            "never rejected or withdrawn, no grant given yet):\n"
        )
        for suggestion in stats.suggestions:
            out.write(hanging("-", suggestion.text, width) + "\n")


async def _run(settings: Settings, args: argparse.Namespace, since_ms: int) -> int:
    document = load_policy(settings)
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    try:
        audit = AuditLog(
            redis, Keys(settings.redis_prefix), settings.audit_maxlen, settings.audit_chain()
        )
        policies = build_policies(settings, document, redis, audit)
        stats = await approval_stats(audit, since_ms, args.conversation, policy_grantable(policies))
        print_stats(stats, sys.stdout, args.json)
        return 0
    finally:
        await redis.aclose()


def run_stats_command(settings: Settings, args: argparse.Namespace) -> int:
    """`clawgate approvals stats …`: 0, or 2 for a bad argument or setting."""
    if not settings.redis_url:
        raise SettingsError("REDIS_URL: required for `clawgate approvals stats` (the audit trail)")
    try:
        since_ms = parse_since(args.since)
        if args.conversation is not None:
            check_scope(args.conversation)
    except (UsageError, ValueError) as exc:
        which = "--conversation: " if not isinstance(exc, UsageError) else ""
        print(f"clawgate: {which}{exc}", file=sys.stderr)
        return 2
    return asyncio.run(_run(settings, args, since_ms))  # Redis down: bot/cli_run.py says so
