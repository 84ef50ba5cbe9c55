"""`clawgate audit verify [--since SINCE] [--session S] [--checkpoints FILE] [--json]`: check the
audit trail's hash chain (runtime/audit_verify.py) and say whether it is intact, or its first
broken link and what it looks like (a changed, deleted, inserted or reordered entry, a
truncated head or start). Exit 0 intact, 1 broken or Redis unreachable, 2 a bad argument."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from bot.settings import Settings
from runtime.audit_verify import (
    Checkpoint,
    Report,
    Scope,
    as_json,
    read_checkpoints,
    verify,
)
from runtime.evidence_keys import UNKEYED
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys

NAMES = {
    "changed": "changed entry",
    "deleted": "deleted entry",
    "inserted": "inserted entry",
    "reordered": "reordered entries",
    "truncated_head": "truncated head",
    "truncated_start": "truncated start",
    "unknown_key": "unknown key id",
    "unkeyed_after_keyed": "unkeyed entry after keyed ones",
    "head_changed": "changed head",
    "head_lost": "lost head",
    "checkpoint": "checkpoint mismatch",
}
UNKEYED_NOTE = (
    "Unkeyed chain (key id none): it detects accidents and careless edits, not an attacker who\n"
    "can write Redis (anyone can rebuild it). Set CLAWGATE_AUDIT_KEY or CLAWGATE_AUDIT_KEY_FILE."
)


def _when(ms: int | None) -> str:
    return (
        "?"
        if ms is None
        else datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    )


def _seq(report: Report) -> str:
    """What positions are counted in: the session's own (`sseq`) or the chain's."""
    return "sseq" if report.session else "seq"


def _span(report: Report) -> str:
    return f"{_seq(report)} {report.first_seq} to {report.last_seq}"


def _written(report: Report, lead: str = "written") -> str:
    return f"{lead} {_when(report.first_at)} to {_when(report.last_at)}"


def render(report: Report, checkpoints: Path | None = None) -> list[str]:
    """The report as a person reads it: the verdict first."""
    scope = f"session {report.session}'s sub-chain" if report.session else "Audit chain"
    n, kids = report.entries, ", ".join(report.key_ids) or "none seen"
    lines: list[str] = []
    if report.broken is not None:
        broken = report.broken
        where = f" at {_seq(report)} {broken.seq}" if broken.seq is not None else ""
        where += f" (entry {broken.id})" if broken.id else ""
        lines.append(f"{scope} BROKEN: {NAMES[broken.kind]}{where}")
        lines.append(f"  {broken.detail}")
        if n:
            which = "checked before it" if broken.id else "checked"
            counted = f"{n:,} entr{'y' if n == 1 else 'ies'}"
            lines.append(f"  {counted} {which}: {_span(report)}, {_written(report)}.")
    elif n == 0:
        lines.append(f"{scope}: no chained entries to check.")
    else:
        lines.append(f"{scope} intact: {n:,} entries checked, {_span(report)}, key ids {kids}.")
        lines.append(f"{_written(report, 'Written')}.")
        if report.head_seq is not None and not report.session:
            lines.append(f"Head: seq {report.head_seq}, matches its entry.")
        if report.trimmed:
            lines.append(f"Entries before seq {report.trimmed + 1} were trimmed by retention.")
        if checkpoints is not None:
            lines.append(
                f"Checkpoints in {checkpoints}: {report.checkpoints} match, "
                f"{report.checkpoints_trimmed} of entries not checked (trimmed, or before --since)."
            )
    if report.predate:
        lines.append(f"{report.predate:,} earlier entries predate the chain (not checked).")
    if not report.keyed or report.key_ids == [UNKEYED]:
        lines.append(UNKEYED_NOTE)
    return lines


async def _run(
    settings: Settings,
    since_ms: int | None,
    session: str | None,
    checkpoints: list[Checkpoint],
) -> Report:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    try:
        return await verify(
            redis,
            Keys(settings.redis_prefix),
            settings.evidence_keys(),
            settings.audit_maxlen,
            Scope(since_ms=since_ms, session=session, checkpoints=checkpoints),
        )
    finally:
        await redis.aclose()


def run_verify(settings: Settings, args: argparse.Namespace, since_ms: int | None) -> int:
    """`since_ms`: `--since`, parsed by the caller as for `audit tail`."""
    out = sys.stdout
    path = Path(args.checkpoints) if args.checkpoints else None
    try:
        checkpoints = read_checkpoints(path) if path is not None else []
    except ValueError as exc:
        print(f"clawgate: --checkpoints: {exc}", file=sys.stderr)
        return 2
    if args.session is not None and not args.session.strip():
        print("clawgate: --session: expected a session id", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(_run(settings, since_ms, args.session, checkpoints))
    except REDIS_FAILURES as exc:
        print(
            f"clawgate: cannot read the audit trail: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 1
    if args.json:
        out.write(json.dumps(as_json(report), indent=2) + "\n")
    else:
        out.write("".join(line + "\n" for line in render(report, path)))
    return 0 if report.ok else 1
