"""Searching the audit trail a page at a time (runtime/audit_search.py), against Redis: newest
first, only what the filter and the reader let through, paged on by entry id, and a bounded
read per page that says where to read on."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from runtime import audit_search
from runtime.audit import AuditEntry, AuditLog
from runtime.audit_search import AuditQuery, search
from runtime.store.keys import Keys


async def _mine(entry: AuditEntry) -> bool:
    return entry.fields.get("conversation") == "mine"


async def test_pages_run_newest_first_over_what_the_reader_may_see(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = AuditLog(redis, Keys("cgsearch"))
    for n in range(9):
        where = "mine" if n % 3 else "theirs"
        await audit.record(
            "approval_decided" if n % 2 else "tool_executed", "a", conversation=where, n=n
        )
    monkeypatch.setattr(audit_search, "CHUNK", 2)  # several reads per page

    first = await search(audit, AuditQuery(), _mine, count=4)
    assert [e.fields["n"] for e in first.entries] == ["8", "7", "5", "4"]
    assert first.older == first.entries[-1].id
    rest = await search(audit, AuditQuery(), _mine, before=first.older, count=4)
    assert [e.fields["n"] for e in rest.entries] == ["2", "1"] and rest.older is None

    decided = await search(audit, AuditQuery(event="approval_decided"), _mine)
    assert [e.fields["n"] for e in decided.entries] == ["7", "5", "1"]

    monkeypatch.setattr(audit_search, "MOST_READ", 4)  # a rare filter: read on from a link
    bounded = await search(audit, AuditQuery(event="approval_decided"), _mine)
    assert [e.fields["n"] for e in bounded.entries] == ["7", "5"]
    assert bounded.older is not None
    more = await search(audit, AuditQuery(event="approval_decided"), _mine, before=bounded.older)
    assert [e.fields["n"] for e in more.entries] == ["1"]
