"""Searching the global audit trail (runtime/audit.py): what `clawgate audit tail --since` and
the console's Audit page share. A moment is a duration back from now (`90s`, `2h`, `7d`, `1w`)
or an ISO date or time; a query keeps the entries of a time range whose conversation, actor,
tool and event are the ones asked for; a page is read newest first, by stream id, leaving out
what the reader may not see."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo

from runtime.audit import AuditEntry, AuditLog

_DURATION = re.compile(r"(\d+)\s*(s|sec|m|min|h|d|w)")
_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
CHUNK = 500  # entries read per round trip while filling a page
MOST_READ = 5000  # entries read for one page at most: a rare filter pages on, not on and on


def parse_moment(text: str, now: float | None = None, zone: tzinfo | None = None) -> int:
    """`text` as milliseconds since the epoch: a duration back from `now`, or an ISO date or
    time (in `zone` unless it names one; None: local time). ValueError otherwise. A moment
    before the epoch is the epoch (no stream entry is older, and Redis takes no negative id)."""
    now = time.time() if now is None else now
    value = text.strip()
    duration = _DURATION.fullmatch(value.lower())
    if duration:
        back = int(duration[1]) * _SECONDS[duration[2]]
        return max(0, int((now - min(back, now)) * 1000))
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"expected a duration like 10m, 2h, 7d or an ISO time like 2025-01-31T09:00, "
            f"got {text[:40]!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone) if zone is not None else moment.astimezone()
    return max(0, int(moment.timestamp() * 1000))


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which entries: at or after `since_ms`, at or before `until_ms` (None: unbounded), and
    with exactly these values of what is not empty."""

    since_ms: int | None = None
    until_ms: int | None = None
    conversation: str = ""
    actor: str = ""
    tool: str = ""
    event: str = ""

    def matches(self, entry: AuditEntry) -> bool:
        if self.since_ms is not None and entry.at < self.since_ms:
            return False
        if self.until_ms is not None and entry.at > self.until_ms:
            return False
        facts = {
            "conversation": (self.conversation, entry.fields.get("conversation", "")),
            "actor": (self.actor, entry.actor),
            "tool": (self.tool, entry.fields.get("tool", "")),
            "event": (self.event, entry.event),
        }
        return all(value == wanted for wanted, value in facts.values() if wanted)


@dataclass(frozen=True, slots=True)
class AuditPage:
    entries: list[AuditEntry]  # newest first
    older: str | None  # the id to read on from (exclusive), None at the end


async def search(
    audit: AuditLog,
    query: AuditQuery,
    visible: Callable[[AuditEntry], Awaitable[bool]],
    *,
    before: str | None = None,
    count: int = 100,
) -> AuditPage:
    """Up to `count` entries matching `query` that `visible` lets the reader see, newest
    first, older than id `before` (None: from the newest or `query.until_ms`). At most
    `MOST_READ` entries are read; the page then says where to read on."""
    top = f"({before}" if before else "+" if query.until_ms is None else str(query.until_ms)
    found: list[AuditEntry] = []
    read = 0
    while read < MOST_READ:
        chunk = list(reversed(await audit.newest(CHUNK, query.since_ms, until=top)))
        read += len(chunk)
        for entry in chunk:
            if query.matches(entry) and await visible(entry):
                found.append(entry)
                if len(found) == count:
                    return AuditPage(found, entry.id)
        if len(chunk) < CHUNK:
            return AuditPage(found, None)
        top = f"({chunk[-1].id}"
    return AuditPage(found, top[1:])
