"""`clawgate audit tail [--follow] [--json] [--since SINCE] [-n N]`: the global audit trail
(`clawgate audit receipt`: bot/cli_receipt.py; `clawgate audit verify`: bot/cli_audit_verify.py).

A table in a terminal (time, event, actor, trace, then the entry's other fields as key=value),
or JSON Lines with --json. `--since` takes a duration back from now (`90s`, `10m`, `2h`, `1d`,
`1w`) or an ISO time (`2025-01-31T09:00`, local time unless it names a zone). Without
`--since` the newest 20 entries are shown (`-n`); with it, every entry since then (up to `-n`
newest if given). `--follow` then prints new entries as they come, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
from datetime import datetime
from typing import TextIO

from bot.cli_audit_verify import run_verify
from bot.cli_parser import DEFAULT_LINES
from bot.cli_receipt import run_receipt_command
from bot.settings import Settings, SettingsError
from bot.tables import hanging, terminal_width
from runtime.audit import AuditEntry, AuditLog
from runtime.audit_search import parse_moment
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys

INTERRUPTED = 130  # the exit code after Ctrl-C
_PLAIN = re.compile(r"[^\s=\"']+")
WIDTHS = (19, 24, 20, 16)  # time, event, actor, trace (padded, never cut)


class UsageError(ValueError):
    """A bad argument: one line, exit code 2."""


def parse_since(text: str) -> int:
    """`--since` as milliseconds since the epoch (runtime/audit_search.py: `parse_moment`)."""
    try:
        return parse_moment(text)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from None


def parse_lines(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"-n: expected a positive number of entries, got {text!r}")
    return value


def _value(text: str) -> str:
    return text if _PLAIN.fullmatch(text) else json.dumps(text, ensure_ascii=False)


def table_line(entry: AuditEntry, width: int | None = None) -> str:
    """One entry; `width`: of the terminal, where the details wrap under their column."""
    when = datetime.fromtimestamp(entry.at / 1000).strftime("%Y-%m-%d %H:%M:%S")
    cells = (when, entry.event, entry.actor or "-", entry.trace or "-")
    head = "  ".join(cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=True))
    rest = " ".join(f"{key}={_value(value)}" for key, value in entry.fields.items())
    return hanging(head, rest, width)


def table_header() -> str:
    names = ("TIME", "EVENT", "ACTOR", "TRACE")
    return "  ".join(n.ljust(w) for n, w in zip(names, WIDTHS, strict=True)) + "  DETAILS"


def json_line(entry: AuditEntry) -> str:
    data = {
        "id": entry.id,
        "at": entry.at,
        "time": entry.time.isoformat(timespec="milliseconds"),
        "event": entry.event,
        "actor": entry.actor,
        "trace": entry.trace,
        "fields": entry.fields,
    }
    return json.dumps(data, ensure_ascii=False)


class _Printer:
    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.count = 0
        self.width = terminal_width(out)

    def __call__(self, entry: AuditEntry) -> None:
        if not self.as_json and self.count == 0:
            self.out.write(table_header() + "\n")
        self.count += 1
        line = json_line(entry) if self.as_json else table_line(entry, self.width)
        self.out.write(line + "\n")
        self.out.flush()


async def tail(
    audit: AuditLog,
    out: TextIO,
    *,
    since_ms: int | None = None,
    lines: int | None = None,
    as_json: bool = False,
    follow: bool = False,
    stop: asyncio.Event | None = None,
) -> int:
    """Print the chosen entries, oldest first; with `follow`, then the new ones until `stop`
    is set (then 130, as for Ctrl-C)."""
    show = _Printer(out, as_json)
    last = await audit.last_id()  # what is printed now ends here; following starts after it
    if since_ms is not None and lines is None:
        async for entry in audit.since(since_ms, until=last):
            show(entry)
    else:
        for entry in await audit.newest(lines or DEFAULT_LINES, since_ms, until=last):
            show(entry)
    if not follow:
        if show.count == 0 and not as_json:
            out.write("No audit entries.\n")
        return 0
    async for entry in audit.follow(last, stop=stop):
        show(entry)
    return INTERRUPTED


def _on_ctrl_c(stop: asyncio.Event) -> bool:
    """Ctrl-C stops following: the flag (checked between blocking reads) and a cancellation
    (immediate, unless the Redis client swallows it mid-command). False where signals cannot
    be handled by the loop: then Ctrl-C raises KeyboardInterrupt as usual."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()

    def interrupt() -> None:
        stop.set()
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (NotImplementedError, RuntimeError):
        return False
    return True


async def _run(settings: Settings, args: argparse.Namespace, since_ms: int | None) -> int:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    stop = asyncio.Event()
    handled = args.follow and _on_ctrl_c(stop)
    try:
        audit = AuditLog(
            redis, Keys(settings.redis_prefix), settings.audit_maxlen, settings.audit_chain()
        )
        return await tail(
            audit,
            sys.stdout,
            since_ms=since_ms,
            lines=parse_lines(args.lines),
            as_json=args.json,
            follow=args.follow,
            stop=stop,
        )
    except asyncio.CancelledError:
        if stop.is_set():
            return INTERRUPTED
        raise
    finally:
        if handled:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        await redis.aclose()


def run_audit_command(settings: Settings, args: argparse.Namespace) -> int:
    """`clawgate audit …`: 0, 2 for a bad argument or setting, 1 when Redis fails."""
    if not settings.redis_url:
        raise SettingsError(
            "REDIS_URL: required for `clawgate audit` (the audit trail lives there)"
        )
    if args.verb == "receipt":
        return run_receipt_command(settings, args, sys.stdout)
    try:
        if args.verb == "tail":
            parse_lines(args.lines)
        since_ms = None if args.since is None else parse_since(args.since)
    except UsageError as exc:
        print(f"clawgate: {exc}", file=sys.stderr)
        return 2
    if args.verb == "verify":
        return run_verify(settings, args, since_ms)
    try:
        return asyncio.run(_run(settings, args, since_ms))
    except REDIS_FAILURES as exc:
        print(
            f"clawgate: cannot read the audit trail: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 1
