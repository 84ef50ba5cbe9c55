"""Checking the audit trail's hash chain (runtime/audit_chain.py): every entry's MAC, the links
between entries (`prev`, `seq`), the head key, retention at the start and, optionally, signed
checkpoints kept outside Redis. Reports the first broken link and what it looks like:

- changed: an entry's MAC does not match its fields;
- deleted: `seq` jumps (or an entry is chained to another than the one before it);
- inserted: an entry without chain fields after chained ones, a copy of another, or one with
  an invalid MAC that the next entry skips over;
- reordered: `seq` goes backwards, or the missing `seq` comes later;
- truncated head: the head key (or a checkpoint) records more than the stream holds;
- truncated start: the stream starts after seq 1 holding fewer entries than retention keeps;
- unknown key / unkeyed after keyed: an entry made with a key id the ring lacks, or without a
  key once entries were keyed; head changed / head lost: the head key rewritten or gone.

With `session`, the session's sub-chain (`sseq`, `sprev`) and its head are checked instead.
Reads the stream in large pages; keeps only the last link and the MACs it must compare.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from runtime.audit_chain import (
    HEAD_REBUILT,
    checkpoint_message,
    entry_message,
    head_message,
    parse_session_head,
)
from runtime.evidence_keys import UNKEYED, KeyRing
from runtime.store.keys import Keys
from runtime.store.streams import Entry, entries

PAGE = 5000
LOOKAHEAD = PAGE  # entries searched for a missing seq before it is called deleted
Kind = Literal[
    "changed",
    "deleted",
    "inserted",
    "reordered",
    "truncated_head",
    "truncated_start",
    "unknown_key",
    "unkeyed_after_keyed",
    "head_changed",
    "head_lost",
    "checkpoint",
]


class Break(BaseModel):
    """The first broken link: what it looks like, where, and in words."""

    kind: Kind
    detail: str
    seq: int | None = None
    id: str | None = None


class Checkpoint(BaseModel):
    """One line of a checkpoint file (CLAWGATE_AUDIT_CHECKPOINT_FILE)."""

    stream: str
    seq: int
    mac: str
    at: str
    kid: str
    sig: str


class Report(BaseModel):
    stream: str
    session: str | None = None
    since_ms: int | None = None
    keyed: bool
    entries: int = 0  # chained entries checked (of the session, with one)
    predate: int = 0  # entries written before the chain began
    trimmed: int = 0  # chained entries before the first kept one, gone by retention
    key_ids: list[str] = []
    first_seq: int | None = None
    last_seq: int | None = None
    first_at: int | None = None
    last_at: int | None = None
    head_seq: int | None = None
    checkpoints: int = 0  # lines of the checkpoint file matched
    checkpoints_trimmed: int = 0  # lines of entries no longer kept
    broken: Break | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None


def read_checkpoints(path: Path) -> list[Checkpoint]:
    """A checkpoint file's lines. Raises ValueError saying which line is unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(Checkpoint.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValidationError):
            raise ValueError(f"{path} line {number}: not a checkpoint") from None
    return found


def verifying_ring(ring: KeyRing) -> KeyRing:
    """`ring` that also verifies unkeyed entries (those written before a key was set)."""
    return replace(ring, keys={UNKEYED: b"", **ring.keys})


def _when(ms: int | str) -> str:
    try:
        moment = datetime.fromtimestamp(int(ms) / 1000, UTC)
    except ValueError:
        return str(ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


class _Stream:
    """The stream read forward in pages, with a look ahead."""

    def __init__(self, redis: Redis, key: str, low: str) -> None:
        self.redis, self.key, self.low = redis, key, low
        self.buffer: deque[Entry] = deque()
        self.done = False

    async def _more(self) -> None:
        raw = await self.redis.xrange(self.key, min=self.low, max="+", count=PAGE)
        page = entries(raw)
        self.buffer.extend(page)
        if page:
            self.low = "(" + page[-1][0]
        self.done = len(page) < PAGE

    async def next(self) -> Entry | None:
        if not self.buffer and not self.done:
            await self._more()
        return self.buffer.popleft() if self.buffer else None

    async def ahead(self, count: int) -> list[Entry]:
        while len(self.buffer) < count and not self.done:
            await self._more()
        return list(self.buffer)[:count]


@dataclass(frozen=True)
class Scope:
    """What of the trail a check covers: entries from `since_ms` on, one `session`'s sub-chain
    instead of the whole chain, and the `checkpoints` to match (those of this stream)."""

    since_ms: int | None = None
    session: str | None = None
    checkpoints: Sequence[Checkpoint] = ()


WHOLE = Scope()


class Verifier:
    def __init__(
        self, redis: Redis, keys: Keys, ring: KeyRing, maxlen: int, scope: Scope = WHOLE
    ) -> None:
        self.redis, self.keys, self.maxlen = redis, keys, maxlen
        self.stream = keys.audit()
        self.ring = verifying_ring(ring)
        self.since_ms, self.session = scope.since_ms, scope.session
        self.checkpoints = [c for c in scope.checkpoints if c.stream == self.stream]
        self.seq_f, self.prev_f = ("sseq", "sprev") if self.session else ("seq", "prev")
        self.report = Report(
            stream=self.stream, session=self.session, since_ms=self.since_ms, keyed=ring.keyed
        )
        self.last: tuple[int, str] | None = None
        self.keyed_seen = False
        self.macs: dict[int, str] = {}  # of the seqs the head and the checkpoints name
        self.head_fields: dict[str, str] = {}

    @staticmethod
    def _at(kind: Kind, detail: str, entry: Entry | None = None, seq: int | None = None) -> Break:
        return Break(kind=kind, detail=detail, seq=seq, id=entry[0] if entry else None)

    def _mine(self, fields: Mapping[str, str]) -> bool:
        return self.session is None or fields.get("session") == self.session

    def _chained(self, fields: Mapping[str, str]) -> bool:
        return "mac" in fields and fields.get(self.seq_f, "").isdigit()

    def _valid(self, fields: Mapping[str, str]) -> bool:
        kid = fields.get("kid", "")
        return self.ring.check(entry_message(self.stream, fields), fields.get("mac", ""), kid)

    async def run(self) -> Report:
        head = await self._head()
        if head is not None:
            self.macs[head[0]] = ""
        for checkpoint in self.checkpoints if not self.session else ():
            self.macs[checkpoint.seq] = ""
        low = "-" if self.since_ms is None else str(max(self.since_ms, 0))
        stream = _Stream(self.redis, self.stream, low)
        broken = None
        while broken is None and (entry := await stream.next()) is not None:
            if self._mine(entry[1]):
                broken = await self._step(entry, stream)
        self.report.broken = broken or await self._ends(head)
        return self.report

    async def _head(self) -> tuple[int, str] | None:
        """The head as read before the walk (entries appended meanwhile are simply more)."""
        if self.session:
            text = await self.redis.hget(self.keys.audit_session_heads(), self.session)
            return parse_session_head(str(text)) if text else None
        head = cast(dict[str, str], await self.redis.hgetall(self.keys.audit_head()))
        if not head:
            return None
        seq = int(head.get("seq", "0") or 0)
        self.report.head_seq = seq
        self.head_fields = head
        return seq, head.get("mac", "")

    async def _step(self, entry: Entry, stream: _Stream) -> Break | None:
        """Check one entry: the break it is, if it is one."""
        entry_id, fields = entry
        report, last = self.report, self.last
        if not self._chained(fields):
            if last is None:
                report.predate += 1
                return None
            return self._at(
                "inserted",
                f"entry {entry_id} carries no chain fields after chained entries: added by hand "
                "(or by a clawgate from before the chain)",
                entry,
            )
        seq, kid = int(fields[self.seq_f]), fields.get("kid", "")
        if kid not in self.ring.keys:
            return self._at(
                "unknown_key",
                f"entry {self.seq_f} {seq} was sealed with key id {kid!r}, which the key ring "
                "lacks (add "
                "the key to verify it)",
                entry,
                seq,
            )
        if kid == UNKEYED and self.keyed_seen:
            return self._at(
                "unkeyed_after_keyed",
                f"entry {self.seq_f} {seq} is unkeyed after keyed entries: forged, or written by "
                "a process "
                "without CLAWGATE_AUDIT_KEY",
                entry,
                seq,
            )
        if not self._valid(fields):
            return await self._invalid(entry, seq, stream)
        if last is not None:
            if seq == last[0] + 1 and fields.get(self.prev_f) != last[1]:
                return self._at(
                    "deleted",
                    f"entry {self.seq_f} {seq} is chained to another entry than {self.seq_f} "
                    f"{last[0]} "
                    "before it: "
                    "that one was replaced",
                    entry,
                    seq,
                )
            if seq > last[0] + 1:
                return await self._gap(entry, seq, stream)
            if seq <= last[0]:
                if self.session and seq == 1 and not fields.get("sprev"):
                    return self._at(
                        "head_lost",
                        f"the session's sub-chain starts again at entry {entry_id}: its head was "
                        "deleted while its entries were kept",
                        entry,
                        seq,
                    )
                if fields["mac"] == last[1]:
                    return self._at(
                        "inserted",
                        f"entry {entry_id} is a copy of entry {self.seq_f} {seq}",
                        entry,
                        seq,
                    )
                return self._at(
                    "reordered",
                    f"{self.seq_f} goes backwards from {last[0]} to {seq} at entry {entry_id}: "
                    "entries "
                    "were reordered",
                    entry,
                    seq,
                )
        if not self.session and fields.get("event") == HEAD_REBUILT:
            return self._at(
                "head_lost",
                f"at seq {seq} the head key had been lost and was rebuilt from the newest entry "
                "then: entries deleted from the end before it cannot be ruled out (check a "
                "checkpoint file; verify --since after it)",
                entry,
                seq,
            )
        self._good(fields, seq)
        return None

    def _good(self, fields: Mapping[str, str], seq: int) -> None:
        report = self.report
        kid = fields["kid"]
        if report.first_seq is None:
            report.first_seq = seq
            report.first_at = _int(fields.get("at"))
        report.last_seq, report.last_at = seq, _int(fields.get("at"))
        report.entries += 1
        if kid not in report.key_ids:
            report.key_ids.append(kid)
        self.keyed_seen = self.keyed_seen or kid != UNKEYED
        if seq in self.macs:
            self.macs[seq] = fields["mac"]
        self.last = (seq, fields["mac"])

    async def _later(self, stream: _Stream) -> list[Entry]:
        return [
            e for e in await stream.ahead(LOOKAHEAD) if self._mine(e[1]) and self._chained(e[1])
        ]

    async def _invalid(self, entry: Entry, seq: int, stream: _Stream) -> Break:
        last = self.last
        following = (await self._later(stream))[:1]
        if last is not None and following:
            nxt = following[0][1]
            if int(nxt[self.seq_f]) == last[0] + 1 and nxt.get(self.prev_f) == last[1]:
                return self._at(
                    "inserted",
                    f"entry {entry[0]} (claiming {self.seq_f} {seq}) has no valid MAC and the "
                    "next entry "
                    "is chained past it: it was inserted",
                    entry,
                    seq,
                )
        return self._at(
            "changed",
            f"entry {self.seq_f} {seq} does not match its MAC: it was changed after it was written",
            entry,
            seq,
        )

    async def _gap(self, entry: Entry, seq: int, stream: _Stream) -> Break:
        assert self.last is not None
        wanted = self.last[0] + 1
        for later_id, later in await self._later(stream):
            if int(later[self.seq_f]) == wanted and later.get(self.prev_f) == self.last[1]:
                return self._at(
                    "reordered",
                    f"entry {self.seq_f} {wanted} comes after {self.seq_f} {seq} (at {later_id}): "
                    "entries were "
                    "reordered",
                    entry,
                    seq,
                )
        missing = seq - wanted
        return self._at(
            "deleted",
            f"{self.seq_f} jumps from {self.last[0]} to {seq}: {missing} "
            f"entr{'y' if missing == 1 else 'ies'} deleted before {entry[0]}",
            entry,
            seq,
        )

    async def _newest(self) -> tuple[int, str] | None:
        """The newest chained entry's seq and mac: what the head must match when nothing was
        chained since `since_ms`."""
        newest = entries(await self.redis.xrevrange(self.stream, count=1))
        fields = newest[0][1] if newest else {}
        return (int(fields["seq"]), fields.get("mac", "")) if self._chained(fields) else None

    async def _ends(self, head: tuple[int, str] | None) -> Break | None:
        """After the last entry: the head, the start, the checkpoints."""
        report, last = self.report, self.last
        if last is None and self.since_ms is not None:
            if self.session:
                return None  # nothing of the session since then: its head says nothing
            last = await self._newest()
        if head is not None and not self.session:
            kid, hmac = self.head_fields.get("kid", ""), self.head_fields.get("hmac", "")
            if kid not in self.ring.keys:
                return self._at(
                    "unknown_key",
                    f"the head key was sealed with key id {kid!r}, which the key ring lacks",
                )
            if not self.ring.check(head_message(self.stream, *head), hmac, kid):
                return self._at(
                    "head_changed",
                    f"the head key (seq {head[0]}) does not match its own MAC: it was rewritten",
                    seq=head[0],
                )
        if head is not None and head[0]:
            ends = last[0] if last else 0
            if head[0] > ends:
                gone = head[0] - ends
                return self._at(
                    "truncated_head",
                    f"the head records seq {head[0]} but the stream ends at seq {ends}: the "
                    f"newest {gone} entr{'y was' if gone == 1 else 'ies were'} deleted",
                    seq=head[0],
                )
            if self.macs.get(head[0]) not in (None, "", head[1]) or (
                head[0] == ends and last is not None and last[1] != head[1]
            ):
                return self._at(
                    "head_changed",
                    f"the head does not match entry seq {head[0]}: the head was rewritten or the "
                    "stream replaced",
                    seq=head[0],
                )
        elif last is not None and self.since_ms is None:
            what = "session's head" if self.session else "head key"
            return self._at(
                "head_lost",
                f"the {what} is missing while the stream holds chained entries: entries deleted "
                "from the end cannot be ruled out",
                seq=last[0],
            )
        if (
            last is not None
            and self.since_ms is None
            and not self.session
            and report.first_seq
            and report.first_seq > 1
        ):
            kept = last[0] - report.first_seq + 1
            newest = max(last[0], head[0] if head else 0)
            if kept < min(newest, self.maxlen):
                return self._at(
                    "truncated_start",
                    f"the stream starts at seq {report.first_seq} holding {kept} chained entries, "
                    f"fewer than retention keeps (CLAWGATE_AUDIT_MAXLEN={self.maxlen}): entries "
                    "were deleted from its start",
                    seq=report.first_seq,
                )
            report.trimmed = report.first_seq - 1
        return None if self.session else self._checkpoints()

    def _checkpoints(self) -> Break | None:
        report = self.report
        newest = max(report.last_seq or 0, report.head_seq or 0)
        for number, cp in enumerate(self.checkpoints, 1):
            message = checkpoint_message(cp.stream, cp.seq, cp.mac, cp.at)
            if not self.ring.check(message, cp.sig, cp.kid):
                return self._at(
                    "checkpoint",
                    f"checkpoint {number} of the file (seq {cp.seq}) does not verify: edited, or "
                    f"its key id {cp.kid!r} is missing",
                    seq=cp.seq,
                )
            if cp.seq > newest:
                return self._at(
                    "truncated_head",
                    f"the checkpoint of {_when(cp.at)} records seq {cp.seq} but the stream ends "
                    f"at seq {newest}: its end was deleted and the head rewound, or it was "
                    "replaced",
                    seq=cp.seq,
                )
            found = self.macs.get(cp.seq, "")
            if not found:
                report.checkpoints_trimmed += 1
            elif found != cp.mac:
                return self._at(
                    "checkpoint",
                    f"entry seq {cp.seq} differs from the checkpoint of {_when(cp.at)}: the "
                    "stream was replaced",
                    seq=cp.seq,
                )
            else:
                report.checkpoints += 1
        return None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


async def verify(
    redis: Redis, keys: Keys, ring: KeyRing, maxlen: int, scope: Scope = WHOLE
) -> Report:
    """The chain of `keys`' audit trail checked (see the module's docstring)."""
    return await Verifier(redis, keys, ring, maxlen, scope).run()


def page_check(stream: str, ring: KeyRing, shown: Iterable[Mapping[str, str]]) -> str:
    """What a page of entries (as stored) says of the chain among themselves, in a line: each
    one's MAC, and the link between any two with consecutive seqs. Not the whole chain:
    `clawgate audit verify` checks that."""
    verifying = verifying_ring(ring)
    chained = [f for f in shown if "mac" in f and f.get("seq", "").isdigit()]
    if not chained:
        return ""
    macs = {int(f["seq"]): f["mac"] for f in chained}
    bad = sum(
        not verifying.check(entry_message(stream, f), f["mac"], f.get("kid", ""))
        or macs.get(int(f["seq"]) - 1, f.get("prev")) != f.get("prev")
        for f in chained
    )
    if bad:
        which = f"{bad} of the {len(chained)} chained entries shown"
        return f"Chain: {which} do not verify; run `clawgate audit verify`."
    kids = sorted({f.get("kid", "") for f in chained})
    how = (
        "unkeyed: it catches accidents, not an attacker"
        if kids == [UNKEYED]
        else "key " + ", ".join(kids)
    )
    return f"Chain: the {len(chained)} chained entries shown verify ({how})."


def as_json(report: Report) -> dict[str, Any]:
    return {"ok": report.ok, **report.model_dump(mode="json")}
