"""The console's filtering, without a browser or Redis: which grants and audit entries a
filter keeps, where a grant applies, how the Audit page reads its time range, and that what
it shows is redacted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters.web.filters import choices, matches
from adapters.web.pages.audit import audit_query, entry_id, shown_row
from adapters.web.pages.grants import grant_facts
from runtime.approval.grants import EVERYWHERE, Grant, thread_scope
from runtime.audit import AuditEntry
from runtime.audit_search import AuditQuery, parse_moment

HERE = "slack:T1:C1"
SECRET = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC).timestamp()


def _grant(scope: str, conversation: str = "", by: str = "slack:U1") -> Grant:
    rule = "bash\x1frm"
    return Grant(scope=scope, rule=rule, reasons=[], by=by, conversation=conversation)


def test_a_grant_applies_in_its_conversation_its_threads_or_none_for_everywhere() -> None:
    assert _grant(HERE).applies_in == HERE
    assert _grant(thread_scope(f"{HERE}:17.1"), HERE).applies_in == HERE
    assert _grant(thread_scope(f"{HERE}:17.1")).applies_in is None  # from before it was kept
    assert _grant(EVERYWHERE, HERE).applies_in is None


def test_grant_filters_keep_the_rows_with_every_value_asked_for() -> None:
    rows = [
        grant_facts(_grant(HERE)),
        grant_facts(_grant(thread_scope(f"{HERE}:1.2"), HERE, by="slack:U2")),
        grant_facts(_grant(EVERYWHERE, HERE)),
    ]
    assert [r["scope"] for r in rows] == ["conversation", "thread", "everywhere"]
    assert [r["conversation"] for r in rows] == [HERE, HERE, "everywhere"]

    def kept(**wanted: str) -> int:
        return sum(matches(row, wanted) for row in rows)

    assert kept() == kept(conversation="", tool="") == 3
    assert kept(conversation=HERE) == 2
    assert kept(conversation=HERE, by="slack:U2") == 1
    assert kept(tool="bash", scope="everywhere") == 1
    assert kept(tool="write") == 0
    assert choices(rows, ("conversation", "by")) == {
        "conversation": ["everywhere", HERE],
        "by": ["slack:U1", "slack:U2"],
    }


def _entry(event: str, at: int, actor: str = "slack:U1", **fields: str) -> AuditEntry:
    return AuditEntry(id=f"{at}-0", at=at, event=event, actor=actor, fields=fields)


def test_an_audit_query_keeps_its_time_range_and_exact_values() -> None:
    decided = _entry("approval_decided", 2000, conversation=HERE, tool="bash")
    reload = _entry("policy_reloaded", 3000, actor="")
    assert AuditQuery().matches(decided) and AuditQuery().matches(reload)
    assert AuditQuery(since_ms=2000, until_ms=2000).matches(decided)
    assert not AuditQuery(since_ms=2001).matches(decided)
    assert not AuditQuery(until_ms=1999).matches(decided)
    assert AuditQuery(conversation=HERE, tool="bash", event="approval_decided").matches(decided)
    assert not AuditQuery(conversation=HERE).matches(reload)
    assert not AuditQuery(actor="slack:U2").matches(decided)
    assert not AuditQuery(event="approval").matches(decided)  # exact, not a prefix


def test_the_audit_page_reads_durations_and_dates_in_utc_and_says_what_is_wrong() -> None:
    blank = dict.fromkeys(("since", "until", "conversation", "actor", "tool", "event"), "")
    query = audit_query({**blank, "since": "7d", "until": "2026-01-31"}, NOW)
    assert isinstance(query, AuditQuery)
    assert query.since_ms == (NOW - 7 * 86_400) * 1000
    assert query.until_ms == (NOW - 12 * 3600) * 1000  # midnight UTC, not the server's zone
    assert audit_query({**blank, "event": "grant_revoked"}, NOW) == AuditQuery(
        event="grant_revoked"
    )
    problem = audit_query({**blank, "until": "yesterday"}, NOW)
    assert isinstance(problem, str) and problem.startswith("until: expected a duration")
    assert parse_moment("2h", NOW) == (NOW - 7200) * 1000


def test_an_audit_row_shows_every_value_redacted() -> None:
    entry = _entry(
        "grant_added", 1000, actor="slack:U1", conversation=HERE, rule=f"curl -H {SECRET}"
    )
    row = shown_row(entry)
    assert row.conversation == HERE and row.event == "grant_added"
    assert row.details == [("rule", "curl -H [redacted]")]
    assert SECRET not in repr(shown_row(_entry(SECRET, 1000, actor=SECRET, tool=SECRET)))


@pytest.mark.parametrize("text", ["yesterday", "10x", ""])
def test_a_moment_that_is_none_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_moment(text)


@pytest.mark.parametrize("text", ["100000d", "9" * 400 + "w", "0001-01-01T00:00+14:00"])
def test_a_moment_before_the_epoch_is_the_epoch(text: str) -> None:
    """Redis takes no negative stream id: a filter reaching that far back is a 200, not a 500."""
    assert parse_moment(text, NOW) == 0


def test_only_ids_redis_takes_page_the_audit_trail() -> None:
    assert entry_id("1700000000000-0") and entry_id(f"{2**64 - 1}-{2**64 - 1}")
    assert not entry_id(f"{2**64}-0") and not entry_id("99999999999999999999-0")
    assert not entry_id("1-2-3") and not entry_id("-1-0")
