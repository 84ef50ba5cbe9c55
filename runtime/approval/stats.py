"""Approval insight: how approval requests went since a moment, read from the global audit
trail (runtime/audit.py), per standing rule (what an "approve always" would grant) and per
conversation, with suggestions where approvers approve the same thing every time.

A request counts when its `approval_requested` entry is in the window; its end is the
`approval_decided` (approved or rejected), `approval_expired` or `approval_cancelled`
(withdrawn) entry that follows, and `approval_refused` entries count refused attempts to
decide it. Time to decision runs from the request's entry to the decision's (each stamped
with its own `at`), over approved and rejected requests only. The trail is read in pages
(XRANGE from the window's start, which stream ids make a time), never whole, up to the entry
that was newest when reading began: what is held is one small record per request.

Each request also counts in the UTC day of its request entry (`by_day`; `daily` fills the days
in between with nothing), for the console's plots.

Entries written before requests recorded their `rule` count under their tool alone, with no
suggestion. Rules are stored with secrets masked (masking them again would mangle the mask).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TypeVar

from runtime.approval.models import AlwaysCover
from runtime.audit import AuditEntry, AuditLog
from runtime.policy.model import scopes_of
from runtime.policy.service import PolicyService

# A suggestion needs this many approvals of one rule in one conversation, every decision an
# approval (none rejected, none withdrawn) and no "approve always" given for it yet.
SUGGEST_MIN_APPROVED = 5
# Whether the conversation's policy still lets an "approve always" of the tool be granted
# (not denied, not on its `ask` list): suggestions are checked with it when given.
Grantable = Callable[[str, str], Awaitable[bool]]
# Whether a conversation's requests are counted (the console: the ones a person oversees).
Visible = Callable[[str], Awaitable[bool]]
K = TypeVar("K")
DAY_MS = 86_400_000
# date.fromordinal of a day since the epoch: cheaper per request than a datetime.
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


@dataclass(slots=True)
class Tally:
    """The requests of one group and how they ended (`waits_ms`: time to each decision)."""

    requests: int = 0
    approved: int = 0
    approved_always: int = 0
    rejected: int = 0
    expired: int = 0
    withdrawn: int = 0
    refused: int = 0  # attempts to decide or withdraw them that were refused
    waits_ms: list[int] = field(default_factory=list)

    @property
    def pending(self) -> int:
        """Requested in the window, not ended by its last entry (still open, or executing)."""
        return self.requests - self.approved - self.rejected - self.expired - self.withdrawn

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.waits_ms) if self.waits_ms else None

    @property
    def p90_ms(self) -> float | None:
        """The nearest-rank 90th percentile: 9 in 10 decisions came at most this fast."""
        if not self.waits_ms:
            return None
        ordered = sorted(self.waits_ms)
        return ordered[math.ceil(0.9 * len(ordered)) - 1]

    def as_json(self) -> dict[str, int | float | None]:
        median, p90 = self.median_ms, self.p90_ms
        return {
            "requests": self.requests,
            "approved": self.approved,
            "approved_always": self.approved_always,
            "rejected": self.rejected,
            "expired": self.expired,
            "withdrawn": self.withdrawn,
            "pending": self.pending,
            "refused": self.refused,
            "median_s": None if median is None else round(median / 1000, 3),
            "p90_s": None if p90 is None else round(p90 / 1000, 3),
        }


@dataclass(frozen=True, slots=True)
class Signature:
    """A tool and the rule an "approve always" of its call would grant (None: no grant could
    cover the call, or it was requested before requests recorded their rule)."""

    tool: str
    rule: str | None
    grantable: bool

    @property
    def shown(self) -> str:
        return self.rule or self.tool


@dataclass(slots=True)
class _Request:
    at: int
    tallies: tuple[Tally, ...]  # its signature's, its conversation's, the pair's, its day's
    ended: bool = False


@dataclass(frozen=True, slots=True)
class Suggestion:
    signature: Signature
    conversation: str
    approved: int
    median_ms: float

    @property
    def text(self) -> str:
        return (
            f"`{self.signature.shown}` approved {self.approved} of {self.approved} times in "
            f"{self.conversation} (median {wait_text(self.median_ms)}): "
            f"`/approve <id> always` at its next request lets it run unasked there; an admin "
            f"may grant it in every conversation with `/approve <id> always everywhere`"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "tool": self.signature.tool,
            "rule": self.signature.rule,
            "conversation": self.conversation,
            "approved": self.approved,
            "median_s": round(self.median_ms / 1000, 3),
            "text": self.text,
        }


@dataclass(slots=True)
class ApprovalStats:
    """The tallies of the requests made from `since_ms` on (those in `conversation` only,
    when given: a conversation id or a prefix of one)."""

    since_ms: int
    conversation: str | None = None
    entries_read: int = 0
    by_signature: dict[Signature, Tally] = field(default_factory=dict)
    by_conversation: dict[str, Tally] = field(default_factory=dict)
    by_both: dict[tuple[str, Signature], Tally] = field(default_factory=dict)
    by_day: dict[date, Tally] = field(default_factory=dict)  # UTC day of the request
    suggestions: list[Suggestion] = field(default_factory=list)
    _requests: dict[str, _Request] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(t.requests for t in self.by_conversation.values())

    def daily(self) -> list[tuple[date, Tally]]:
        """Every UTC day from the first request's to the last's, oldest first; a day without
        requests has an empty tally (a plot shows it as a gap, not as nothing)."""
        if not self.by_day:
            return []
        first, last = min(self.by_day), max(self.by_day)
        days = (first + timedelta(days=n) for n in range((last - first).days + 1))
        return [(day, self.by_day.get(day) or Tally()) for day in days]

    def _tallies(self, signature: Signature, conversation: str, at: int) -> tuple[Tally, ...]:
        day = date.fromordinal(_EPOCH_ORDINAL + at // DAY_MS)
        return (
            self.by_signature.setdefault(signature, Tally()),
            self.by_conversation.setdefault(conversation, Tally()),
            self.by_both.setdefault((conversation, signature), Tally()),
            self.by_day.setdefault(day, Tally()),
        )

    def add(self, entry: AuditEntry) -> None:
        """Count one audit entry (entries come oldest first)."""
        self.entries_read += 1
        approval = entry.fields.get("approval", "")
        if entry.event == "approval_requested":
            self._requested(approval, entry)
            return
        request = self._requests.get(approval)
        if request is None:  # requested before the window, or elsewhere than asked
            return
        tallies = request.tallies
        if entry.event == "approval_refused":
            for tally in tallies:
                tally.refused += 1
            return
        if request.ended or entry.event not in ENDINGS:
            return
        request.ended = True
        decision = entry.fields.get("decision", "")
        for tally in tallies:
            if entry.event == "approval_expired":
                tally.expired += 1
            elif entry.event == "approval_cancelled":
                tally.withdrawn += 1
            else:
                tally.waits_ms.append(max(0, entry.at - request.at))
                if decision == "approved":
                    tally.approved += 1
                    tally.approved_always += entry.fields.get("scope") == "always"
                else:
                    tally.rejected += 1

    def _requested(self, approval: str, entry: AuditEntry) -> None:
        conversation = entry.fields.get("conversation", "")
        if self.conversation is not None and self.conversation not in scopes_of(conversation):
            return
        rule = entry.fields.get("rule")
        always = entry.fields.get("always", AlwaysCover.NEVER.value)
        signature = Signature(
            tool=entry.fields.get("tool", "?"),
            rule=rule,
            grantable=rule is not None and always != AlwaysCover.NEVER.value,
        )
        request = _Request(entry.at, self._tallies(signature, conversation, entry.at))
        self._requests[approval] = request
        for tally in request.tallies:
            tally.requests += 1

    async def suggest(self, grantable: Grantable | None = None) -> None:
        """Fill `suggestions`: a grantable rule of a conversation approved every time it was
        decided, at least SUGGEST_MIN_APPROVED times, with no "always" given for it yet;
        `grantable`: the policy's word on whether the tool may be granted there now."""
        found = []
        for (conversation, signature), tally in self.by_both.items():
            if not (
                signature.grantable
                and tally.approved >= SUGGEST_MIN_APPROVED
                and tally.rejected == tally.withdrawn == tally.approved_always == 0
                and tally.median_ms is not None
            ):
                continue
            if grantable is not None and not await grantable(conversation, signature.tool):
                continue
            found.append(Suggestion(signature, conversation, tally.approved, tally.median_ms))
        found.sort(key=lambda s: (-s.approved, s.conversation, s.signature.shown))
        self.suggestions = found

    def as_json(self) -> dict[str, object]:
        return {
            "since_ms": self.since_ms,
            "conversation": self.conversation,
            "entries_read": self.entries_read,
            "requests": self.requests,
            "signatures": [
                {"tool": s.tool, "rule": s.rule, "grantable": s.grantable, **t.as_json()}
                for s, t in ranked(self.by_signature)
            ],
            "conversations": [
                {"conversation": c, **t.as_json()} for c, t in ranked(self.by_conversation)
            ],
            "days": [{"day": d.isoformat(), **t.as_json()} for d, t in self.daily()],
            "suggestions": [s.as_json() for s in self.suggestions],
        }


ENDINGS = frozenset({"approval_decided", "approval_expired", "approval_cancelled"})


def ranked(tallies: dict[K, Tally]) -> list[tuple[K, Tally]]:
    """Most requested first; ties in the order first requested."""
    return sorted(tallies.items(), key=lambda item: -item[1].requests)


async def approval_stats(
    audit: AuditLog,
    since_ms: int,
    conversation: str | None = None,
    grantable: Grantable | None = None,
    visible: Visible | None = None,
) -> ApprovalStats:
    """The approval requests made since `since_ms` (ms since the epoch), and how they went;
    with `visible`, only those of the conversations it says yes to (what one person oversees)."""
    stats = ApprovalStats(since_ms, conversation)
    async for entry in audit.since(since_ms, until=await audit.last_id()):
        if (
            visible is not None
            and entry.event == "approval_requested"
            and not await visible(entry.fields.get("conversation", ""))
        ):
            continue  # what follows of that request is left out with it
        stats.add(entry)
    await stats.suggest(grantable)
    return stats


def policy_grantable(policies: PolicyService) -> Grantable:
    """The policy's word for suggestions: a tool the conversation's policy denies, or makes
    always ask (where an "approve always" adds no grant), gets none. A tool this process does
    not enable is not judged: the serving processes may enable it."""

    async def grantable(conversation: str, tool: str) -> bool:
        overrides = await policies.overrides(conversation, also=(tool,))
        verdict = policies.resolve(conversation, overrides, also=(tool,)).verdict(tool)
        return verdict.state not in ("ask", "deny")

    return grantable


def wait_text(ms: float) -> str:
    """`0.4 s`, `40 s`, `3 min`, `2.5 h`, `1.2 d`: a wait as people say it."""
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{round(seconds)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"
