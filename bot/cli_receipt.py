"""`clawgate audit receipt <id> [--json]`: whether a tool receipt is genuine.

Finds the audit entry that records the receipt, recomputes its MAC with the key ring of this
process's settings (CLAWGATE_AUDIT_KEY / CLAWGATE_AUDIT_KEY_FILE) and compares the session's
history with it (runtime/receipt_check.py). Prints `verified` or `NOT verified: why`, then
the receipt's fields; with --json one object. Exit 0 verified, 1 not verified or not found
(or Redis unreachable: one line on stderr), 2 for a malformed id.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import UTC, datetime
from typing import TextIO

from bot.settings import Settings
from runtime.audit import AuditLog
from runtime.receipt_check import ReceiptCheck, check
from runtime.receipts import ID_HEX, PREFIX
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys

RECEIPT_ID = re.compile(rf"^{PREFIX}[0-9a-f]{{{ID_HEX}}}$")
HISTORY = {
    "matches": "the session's history holds this call's result, and it hashes to result_sha256",
    "differs": "the session's history holds a DIFFERENT result for this call",
    "cut": "the session's history holds the result as cut for the model (result_sha256 is "
    "over the whole output): not compared",
    "absent": "the session's history no longer holds this call's result: not compared",
}


def render(done: ReceiptCheck) -> list[str]:
    if done.receipt is None:
        return [f"receipt {done.id}: NOT verified: {done.why}"]
    receipt = done.receipt
    verdict = "verified" if done.verified else f"NOT verified: {done.why}"
    made = datetime.fromtimestamp(receipt.at / 1000, UTC).isoformat(timespec="milliseconds")
    lines = [
        f"receipt {done.id}: {verdict}",
        f"  tool:          {receipt.tool}",
        f"  session:       {receipt.session}",
        f"  approval:      {receipt.approval or '-'}",
        f"  args_sha256:   {receipt.args_sha256}",
        f"  result_sha256: {receipt.result_sha256}",
        f"  made:          {made} with key {receipt.kid}",
        f"  audit entry:   {done.entry}",
        f"  history:       {HISTORY[done.history]}",
    ]
    if not done.keyed:
        lines.append(
            "  note:          made without a key (CLAWGATE_AUDIT_KEY unset): whoever can "
            "write Redis could have made it"
        )
    return lines


async def _check(settings: Settings, receipt_id: str) -> ReceiptCheck:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    try:
        keys = Keys(settings.redis_prefix)
        audit = AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
        return await check(audit, HistoryStore(redis, keys), settings.evidence_keys(), receipt_id)
    finally:
        await redis.aclose()


def run_receipt_command(settings: Settings, args: argparse.Namespace, out: TextIO) -> int:
    receipt_id = args.id.strip().lower()
    if not RECEIPT_ID.fullmatch(receipt_id):
        print(
            f"clawgate: {args.id!r} is not a receipt id ({PREFIX} and {ID_HEX} hex digits)",
            file=sys.stderr,
        )
        return 2
    try:
        done = asyncio.run(_check(settings, receipt_id))
    except REDIS_FAILURES as exc:
        print(
            f"clawgate: cannot read the audit trail: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 1
    if args.json:
        out.write(json.dumps(done.model_dump(mode="json"), ensure_ascii=False) + "\n")
    else:
        out.write("\n".join(render(done)) + "\n")
    out.flush()
    return 0 if done.verified else 1
