"""`clawgate approvals stats`: how approval requests went, from the global audit trail in a real
Redis. Requests made through the real runtime record the rule an "approve always" would grant
(none for a chain, masked secrets); a trail seeded with the audit API's entries at known times
gives exact counts, medians and p90s, suggestions only where they apply, and `--since` and
`--conversation` windows; the real `clawgate` entry point prints them."""

from __future__ import annotations

import io
import json
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.web.charts import insight_svgs
from bot.cli import main
from bot.cli_stats import print_stats
from runtime.approval.stats import ApprovalStats, approval_stats, policy_grantable, wait_text
from runtime.audit import AuditLog
from runtime.models import ConversationRef, StopReason
from runtime.policy.model import PolicyDocument, ScopeRules
from runtime.providers.demo import DemoProvider
from runtime.store.keys import Keys
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_policies, make_runtime

SECRET = "sk-live0123456789abcdefghij"
OTHER = ConversationRef(platform="console", id="console:other")
HOUR_MS = 3_600_000
C1, C2 = "slack:T1:C1", "slack:T1:C2"


def audit_of(redis: aioredis.Redis) -> AuditLog:
    return AuditLog(redis, Keys(PREFIX))


async def test_requests_through_the_runtime_are_counted_by_their_rule_and_redacted(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    asked = []
    commands = [
        *[("rm -f build.log", HERE, True)] * 5,
        ("rm -f build.log", OTHER, False),
        ("rm -f a.log; rm -f b.log", HERE, True),  # a chain: approved once only, no rule
        (f"curl -H 'Authorization: Bearer {SECRET}' https://example.com/x", HERE, False),
    ]
    for i, (command, where, approve) in enumerate(commands):
        result = await runtime.run(f"s{i}", f"run: {command}", ALICE, where)
        assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
        asked.append(result.approval_id)
        decision = await runtime.decide(result.approval_id, approve, ADMIN, where, reason="no")
        assert decision.accepted, decision.message

    stats = await approval_stats(runtime.audit, int(time.time() * 1000) - HOUR_MS)
    data = stats.as_json()
    rows = {(s["tool"], s["rule"]): s for s in data["signatures"]}  # type: ignore[attr-defined]
    curl = next(rule for _, rule in rows if rule and rule.startswith("bash curl"))
    assert SECRET not in curl and curl.startswith("bash curl -H 'Authorization: [redacted]")
    assert set(rows) == {("bash", "bash rm -f"), ("bash", None), ("bash", curl)}, rows
    rm = rows["bash", "bash rm -f"]
    assert (rm["requests"], rm["approved"], rm["rejected"], rm["pending"]) == (6, 5, 1, 0)
    assert rows["bash", None]["approved"] == 1 and not rows["bash", None]["grantable"]
    by_conversation = {c["conversation"]: c for c in data["conversations"]}  # type: ignore[attr-defined]
    assert by_conversation[HERE.id]["requests"] == 7 and by_conversation[OTHER.id]["rejected"] == 1
    (suggestion,) = stats.suggestions  # five of five in HERE; one rejected in OTHER, and no chain
    assert suggestion.conversation == HERE.id and suggestion.signature.rule == "bash rm -f"
    assert suggestion.text.startswith(f"`bash rm -f` approved 5 of 5 times in {HERE.id} (median ")

    shown = io.StringIO()
    print_stats(stats, shown, as_json=False)
    print_stats(stats, shown, as_json=True)
    assert SECRET not in shown.getvalue() and "Authorization: [redacted]" in shown.getvalue()


def entry(event: str, at: int, approval: str, **fields: Any) -> dict[str, str]:
    """An audit entry as the runtime writes it (the audit API's own shape), stamped `at`."""
    data = AuditLog.entry(event, "slack:UADMIN", approval=approval, **fields)
    return data | {"at": str(at)}


def request(
    approval: str,
    at: int,
    conversation: str,
    rule: str | None,
    always: str = "rule",
    tool: str = "bash",
) -> dict[str, str]:
    fields = {"rule": rule, "always": always} if rule else {"always": always}
    return entry("approval_requested", at, approval, tool=tool, conversation=conversation, **fields)


def decided(
    approval: str, at: int, decision: str = "approved", scope: str = "once"
) -> dict[str, str]:
    return entry("approval_decided", at, approval, decision=decision, scope=scope)


async def seed(redis: aioredis.Redis, entries: list[dict[str, str]]) -> None:
    """Written with stream ids at their own times (ids are times: what `--since` reads by)."""
    key = Keys(PREFIX).audit()
    for seq, fields in enumerate(sorted(entries, key=lambda e: int(e["at"]))):
        await redis.xadd(key, fields, id=f"{fields['at']}-{seq}")  # type: ignore[arg-type]


def trail(now: int) -> list[dict[str, str]]:
    """Six `git status` approved in C1 after 10..60 s, and the cases that get no suggestion."""
    t = now - 2 * HOUR_MS
    out = []
    for i, wait_s in enumerate((10, 20, 30, 40, 50, 60)):
        start = t + i * 100_000
        out += [
            request(f"st{i}", start, C1, "bash git status"),
            decided(f"st{i}", start + wait_s * 1000),
        ]
    out.append(entry("approval_refused", t + 600_000, "st0", why="already_decided"))
    for i in range(6):  # five approved, one rejected: not always approved
        out += [request(f"pu{i}", t + i, C1, "bash git push origin main")]
        out += [decided(f"pu{i}", t + i + 5_000, "rejected" if i == 3 else "approved")]
    for i in range(5):  # a chain (no rule), an MCP tool that never gets an "always"
        out += [request(f"ch{i}", t + 10 + i, C1, None), decided(f"ch{i}", t + 4_000)]
        out += [request(f"mc{i}", t + 20 + i, C1, None, "never", "github.delete_repo")]
        out += [decided(f"mc{i}", t + 4_000)]
    for i in range(5):  # in C2, the last "approve always" left a grant already
        out += [request(f"c2{i}", t + 30 + i, C2, "bash git status")]
        out += [decided(f"c2{i}", t + 9_000, scope="always" if i == 4 else "once")]
    out += [request("ex", t + 40, C1, "bash rm -r"), entry("approval_expired", t + HOUR_MS, "ex")]
    out += [request("wd", t + 41, C1, "bash rm -r"), entry("approval_cancelled", t + 50, "wd")]
    out += [request("open", t + 42, C1, "bash rm -r")]
    old = now - 8 * 24 * HOUR_MS  # before --since 7d: not counted
    out += [request("old", old, C1, "bash git status"), decided("old", old + 1_000, "rejected")]
    # written before requests recorded their rule: counted under the tool, never suggested
    legacy = entry("approval_requested", t + 43, "lg", tool="write", conversation=C1)
    return [*out, legacy, decided("lg", t + 2_043)]


async def test_counts_times_and_suggestions_of_a_seeded_trail(redis: aioredis.Redis) -> None:
    now = int(time.time() * 1000)
    await seed(redis, trail(now))
    stats = await approval_stats(audit_of(redis), now - 7 * 24 * HOUR_MS)
    data = stats.as_json()
    rows = {(s["tool"], s["rule"]): s for s in data["signatures"]}  # type: ignore[attr-defined]
    status = rows[
        "bash", "bash git status"
    ]  # C1's six and C2's five; not the one before the window
    assert (status["requests"], status["approved"], status["rejected"]) == (11, 11, 0)
    assert status["approved_always"] == 1 and status["refused"] == 1
    rm = rows["bash", "bash rm -r"]
    assert (rm["requests"], rm["expired"], rm["withdrawn"], rm["pending"]) == (3, 1, 1, 1)
    assert rm["median_s"] is None and rm["p90_s"] is None  # nothing decided
    assert rows["bash", "bash git push origin main"]["rejected"] == 1
    for tool in ("bash", "github.delete_repo", "write"):  # a chain, a never-always, a legacy
        assert not rows[tool, None]["grantable"]
    assert rows["bash", None]["approved"] == 5 and rows["write", None]["median_s"] == 2.0
    c1 = next(c for c in data["conversations"] if c["conversation"] == C1)  # type: ignore[attr-defined]
    assert c1["requests"] == 6 + 6 + 5 + 5 + 3 + 1 and data["requests"] == 26 + 5

    one = stats.by_both[C1, next(s for s in stats.by_signature if s.rule == "bash git status")]
    assert sorted(one.waits_ms) == [10_000, 20_000, 30_000, 40_000, 50_000, 60_000]
    assert (one.median_ms, one.p90_ms) == (35_000, 60_000)  # p90: nearest rank, 6th of 6
    (suggestion,) = stats.suggestions  # not C2's (granted), the push, the chain, the MCP tool
    assert (suggestion.conversation, suggestion.signature.rule) == (C1, "bash git status")
    assert suggestion.text == (
        f"`bash git status` approved 6 of 6 times in {C1} (median 35 s): `/approve <id> always` "
        "at its next request lets it run unasked there; an admin may grant it in every "
        "conversation with `/approve <id> always everywhere`"
    )

    shown = io.StringIO()
    print_stats(stats, shown, as_json=False, width=None)
    text = shown.getvalue()
    assert text.startswith("31 approval requests since ")
    line = next(row for row in text.splitlines() if row.endswith("bash git status"))
    assert line.split() == [
        "bash",
        "11",
        "11",
        "0",
        "0",
        "0",
        "1",
        "10",
        "s",
        "50",
        "s",
        "bash",
        "git",
        "status",
    ]
    assert text.rstrip().endswith(suggestion.text)


async def test_since_conversation_and_the_policy_narrow_it(redis: aioredis.Redis) -> None:
    now = int(time.time() * 1000)
    await seed(redis, trail(now))
    audit = audit_of(redis)
    recent = await approval_stats(audit, now - HOUR_MS)  # only the expiry: no requests
    assert recent.requests == 0 and recent.entries_read == 1
    empty = io.StringIO()
    print_stats(recent, empty, as_json=False)
    assert empty.getvalue().startswith("No approval requests since ")

    everything = await approval_stats(audit, 0)
    assert everything.requests == 32  # with the one from 8 days ago

    c2 = await approval_stats(audit, now - 7 * 24 * HOUR_MS, conversation=C2)
    assert list(c2.by_conversation) == [C2] and c2.requests == 5
    slack = await approval_stats(audit, now - 7 * 24 * HOUR_MS, conversation="slack:T1")
    assert set(slack.by_conversation) == {C1, C2}
    assert (await approval_stats(audit, 0, conversation="slack:T")).requests == 0  # whole parts

    async def oversees_c2(conversation: str) -> bool:  # the console: what one person oversees
        return conversation == C2

    seen = await approval_stats(audit, now - 7 * 24 * HOUR_MS, visible=oversees_c2)
    assert list(seen.by_conversation) == [C2] and seen.requests == 5
    assert {s.rule for s in seen.by_signature} == {"bash git status"}
    assert sum(t.approved for t in seen.by_signature.values()) == 5  # its decisions, no other
    assert seen.suggestions == []  # C1's suggestion is not shown to who oversees C2 only

    # bash always asks in C1 now: an "approve always" would add no grant there.
    document = PolicyDocument()
    document.conversations[C1] = ScopeRules()
    document.conversations[C1].tools.ask = ["bash"]
    policies = make_policies(redis, document=document)
    asked = await approval_stats(
        audit, now - 7 * 24 * HOUR_MS, grantable=policy_grantable(policies)
    )
    assert asked.suggestions == []
    plain = await approval_stats(
        audit, now - 7 * 24 * HOUR_MS, grantable=policy_grantable(make_policies(redis))
    )
    assert len(plain.suggestions) == 1


async def test_per_day_figures_in_utc_days_with_the_gaps(redis: aioredis.Redis) -> None:
    """A request counts on the UTC day it was made, even when decided the next; a day with no
    requests is there, empty; the CLI prints the days, `--json` has them, the plots use them."""
    day_ms = 24 * HOUR_MS
    midnight = (int(time.time() * 1000) // day_ms - 3) * day_ms  # three days ago, 00:00 UTC
    first = datetime.fromtimestamp(midnight / 1000, UTC).date()
    out = []
    for i, wait_s in enumerate((10, 20, 30, 40, 600)):  # day 1: five approved
        out += [request(f"a{i}", midnight + i * 1000, C1, "bash ls")]
        out += [decided(f"a{i}", midnight + i * 1000 + wait_s * 1000)]
    late = midnight + day_ms - 1000  # day 1, 23:59:59: decided on day 2
    out += [request("late", late, C1, "bash ls"), decided("late", late + 7_200_000, "rejected")]
    third = midnight + 2 * day_ms  # day 2: nothing asked; day 3: one expired, one open
    out += [request("ex", third, C2, "bash rm"), entry("approval_expired", third + HOUR_MS, "ex")]
    out += [request("open", third + 1, C2, "bash rm")]
    await seed(redis, out)

    stats = await approval_stats(audit_of(redis), midnight)
    days = stats.daily()
    assert [d for d, _ in days] == [first + timedelta(days=n) for n in range(3)]
    one, two, three = (t for _, t in days)
    assert (one.requests, one.approved, one.rejected, one.expired) == (6, 5, 1, 0)
    assert (one.median_ms, one.p90_ms) == (35_000, 7_200_000)  # of 10, 20, 30, 40, 600 s, 2 h
    assert two.requests == 0 and two.median_ms is None
    assert (three.requests, three.expired, three.pending, three.p90_ms) == (2, 1, 1, None)
    json_days = stats.as_json()["days"]
    assert [(d["day"], d["requests"], d["p90_s"]) for d in json_days] == [  # type: ignore[attr-defined]
        (first.isoformat(), 6, 7200.0),
        ((first + timedelta(days=1)).isoformat(), 0, None),
        ((first + timedelta(days=2)).isoformat(), 2, None),
    ]

    shown = io.StringIO()
    print_stats(stats, shown, as_json=False, width=None)
    rows = {line.split()[0]: line.split()[1:] for line in shown.getvalue().splitlines() if line}
    assert rows[first.isoformat()] == ["6", "5", "1", "0", "0", "0", "35", "s", "2.0", "h"]
    assert rows[(first + timedelta(days=1)).isoformat()][:2] == ["0", "0"]

    svgs = insight_svgs(stats)
    (approved,) = [
        e for e in ET.fromstring(svgs["outcomes"]).iter() if e.get("class") == "bar-approved"
    ]
    assert (
        approved.findtext("{http://www.w3.org/2000/svg}title") == f"{first.isoformat()}: 5 approved"
    )


def test_wait_text() -> None:
    assert [wait_text(ms) for ms in (400, 40_000, 200_000, 9_000_000, 200_000_000)] == [
        "0.4 s",
        "40 s",
        "3 min",
        "2.5 h",
        "2.3 d",
    ]


def test_an_empty_tally_has_no_times() -> None:
    stats = ApprovalStats(since_ms=0)
    assert stats.as_json()["signatures"] == [] and stats.suggestions == []


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_url: str) -> None:
    """An operator's shell: only REDIS_URL (and the tests' prefix), an empty directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CLAWGATE_REDIS_PREFIX", PREFIX)
    monkeypatch.setenv("CLAWGATE_SANDBOX", "off")


@pytest.mark.usefixtures("shell")
async def test_the_clawgate_command(
    redis: aioredis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time() * 1000)
    await seed(redis, trail(now))
    assert await _cli("approvals", "stats", "--json", "--conversation", C2) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 5 and data["conversations"][0]["conversation"] == C2
    assert await _cli("approvals", "stats") == 0  # the last 7 days
    out = capsys.readouterr().out
    assert out.startswith("31 approval requests since ") and "\nSuggestions" in out
    assert "`bash git status` approved 6 of 6 times in slack:T1:C1" in out
    assert await _cli("approvals", "stats", "--since", "30d", "--json") == 0
    data = json.loads(capsys.readouterr().out)  # with the rejection 8 days ago: no suggestion
    assert data["requests"] == 32 and data["suggestions"] == []
    for argv, said in (
        (["--since", "yesterday"], "clawgate: --since: expected a duration like 10m"),
        (["--conversation", "slack:T1 C1"], "clawgate: --conversation: invalid scope"),
    ):
        assert await _cli("approvals", "stats", *argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(said), line


async def _cli(*argv: str) -> int:
    """The real entry point, off this test's event loop (it runs its own)."""
    import asyncio  # noqa: PLC0415

    return await asyncio.to_thread(main, list(argv))
