"""The global audit trail: one append-only Redis Stream (`<prefix>:audit`) of what happened,
across every session: inbound commands, approval requests, decisions, refusals with their
reasons, standing rules, policy changes and tool executions. Every entry carries the trace id of
the run it belongs to ("" outside a run).

Retention: the stream is capped at about the newest `maxlen` entries (`XADD MAXLEN ~`, so Redis
trims whole nodes and may keep a few more). Tool arguments are never stored, only their
`args_sha256` (over the canonical JSON the approval record stores too) and their key names
(at most 20, each cut at 64 characters); a tool name the model made up is stored as
`(unknown)` with its hash. Risk reasons and standing rules, which may quote parts of a command
or a path, are stored with secrets masked.

Building and writing never raise: by the time something is audited its side effect has
happened, so a failure logs one warning and the caller goes on. The per-session streams written
by the approval scripts (exact, atomic with each transition) stay as they are; this one is the
operator's timeline (`clawgate audit tail`).

Every entry is sealed into a hash chain as it is written (runtime/audit_chain.py: its `seq`,
`kid`, `prev`, `mac`, and `sseq`, `sprev` in a session), which `clawgate audit verify` checks
(runtime/audit_verify.py). Read back, those fields are the entry's `chain`, not its `fields`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict
from redis.asyncio import Redis

from runtime.audit_chain import CHAIN_FIELDS, ChainConfig, ChainWriter
from runtime.audit_verify import page_check
from runtime.canonical import key_names, text_sha256
from runtime.store.keys import Keys
from runtime.store.streams import entries, last_id, read_after
from runtime.trace_context import current_trace_id

log = logging.getLogger(__name__)
# The entries of the unit of work the running code is in (see AuditLog.unit), with their log.
_UNIT: ContextVar[list[tuple[AuditLog, Mapping[str, str]]] | None] = ContextVar(
    "clawgate_audit_unit", default=None
)

DEFAULT_MAXLEN = 100_000
Field = str | int | float | None
RESERVED = ("event", "at", "actor", "trace", *CHAIN_FIELDS)
PAGE = 1000


class AuditEntry(BaseModel):
    """One entry as read back: the stream id, when (ms since the epoch), what, who, which run,
    the event's other fields, and its place in the chain (runtime/audit_chain.py)."""

    model_config = ConfigDict(frozen=True)

    id: str
    at: int
    event: str
    actor: str = ""
    trace: str = ""
    fields: dict[str, str] = {}
    chain: dict[str, str] = {}

    @classmethod
    def from_stream(cls, entry_id: str, raw: Mapping[str, str]) -> AuditEntry:
        data = dict(raw)
        try:
            at = int(data.pop("at", ""))
        except ValueError:
            at = int(entry_id.split("-", 1)[0])  # the stream id is the server time in ms
        return cls(
            id=entry_id,
            at=at,
            event=data.pop("event", ""),
            actor=data.pop("actor", ""),
            trace=data.pop("trace", ""),
            chain={name: data.pop(name) for name in CHAIN_FIELDS if name in data},
            fields=data,
        )

    def stored(self) -> dict[str, str]:
        """The entry's fields as the chain sealed them (as `AuditLog.entry` writes every one)."""
        fixed = {"event": self.event, "actor": self.actor, "trace": self.trace, "at": str(self.at)}
        return {**self.fields, **fixed, **self.chain}

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.at / 1000, tz=UTC)


def _text(value: str | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate (model text): Redis takes only UTF-8
        text = text.encode("utf-8", "replace").decode()
    return text


def arguments_digest(canonical: str) -> tuple[str | None, str]:
    """(`args_sha256`, `arg_keys`) of a call's canonical arguments: the hash only when they
    are JSON (unparseable text is not hashed), the keys only of a JSON object (comma list of
    at most 20 names, each cut at 64 characters)."""
    try:
        value = json.loads(canonical)
    except json.JSONDecodeError:
        return None, ""
    digest = text_sha256(canonical)
    keys = ",".join(key_names(value)) if isinstance(value, dict) else ""
    return digest, keys


class AuditLog:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        maxlen: int = DEFAULT_MAXLEN,
        chain: ChainConfig | None = None,
    ) -> None:
        """`chain`: the key ring and checkpoints (default: unkeyed, as with no key set)."""
        self.redis = redis
        self.keys = keys
        self.maxlen = maxlen
        self.key = keys.audit()
        self.writer = ChainWriter(redis, keys, maxlen, chain or ChainConfig())

    # --- writing ----------------------------------------------------------------------------

    @staticmethod
    def entry(event: str, actor: str = "", **fields: Field) -> dict[str, str]:
        """The stream fields of one entry, stamped now with the current run's trace id (a
        `trace` field given here wins: e.g. the trace of the run an approval suspended, for a
        decision made outside any run). Build it where the thing happens; `record_many`.
        Never raises: fields that cannot be written are left out (`incomplete`), with a
        warning; text that is not valid UTF-8 (a lone surrogate) has it replaced by `?`."""
        trace = fields.pop("trace", None)
        try:
            data = {k: _text(v) for k, v in fields.items() if v is not None and k not in RESERVED}
            data.update(
                actor=_text(actor), trace=_text(trace) if trace else current_trace_id() or ""
            )
        except Exception as exc:  # never fail the caller: keep what happened, not its details
            log.warning("audit: %s entry without its fields: %s", event, type(exc).__name__)
            data = {"incomplete": "true", "actor": "", "trace": ""}
        data.update(event=event, at=str(int(time.time() * 1000)))
        return data

    async def record(self, event: str, actor: str = "", **fields: Field) -> None:
        """Append one entry; None fields are left out. Never raises. `at` (ms) and `trace`
        (the current run's, "" outside a run, unless given) are added. Inside a `unit` the
        entry waits for the unit's end (or a `flush`)."""
        await self.add([self.entry(event, actor, **fields)])

    async def add(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Entries built with `entry`: kept for the current unit, else written now."""
        if not self.keep(*entries):
            await self.record_many(entries)

    def keep(self, *entries: Mapping[str, str]) -> bool:
        """Hold entries for the current unit; False (nothing held) outside a unit."""
        pending = _UNIT.get()
        if pending is None:
            return False
        pending.extend((self, e) for e in entries)
        return True

    @contextlib.asynccontextmanager
    async def unit(self) -> AsyncIterator[None]:
        """What is recorded inside (a run, a decision) is written in one round trip when the
        block ends, or earlier by `flush`. A unit inside another joins it."""
        if _UNIT.get() is not None:
            yield
            return
        mine: list[tuple[AuditLog, Mapping[str, str]]] = []
        token = _UNIT.set(mine)
        try:
            yield
        finally:
            # Its own entries, by reference: the block may end in another context (a
            # generator finalized elsewhere), where the current unit is someone else's.
            with contextlib.suppress(ValueError):
                _UNIT.reset(token)
            await _write(mine)

    async def flush(self) -> None:
        """Write what the current unit holds now: before a call with side effects, so its
        record and those before it are not lost if the process dies during it."""
        await _write(_UNIT.get() or [])

    async def record_many(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append entries built with `entry`, chained, in one round trip (with what other
        tasks of this process append meanwhile). Never raises."""
        if not entries:
            return
        await self.writer.append(entries)

    # --- reading ----------------------------------------------------------------------------

    def check_shown(self, shown: Sequence[AuditEntry]) -> str:
        """A line on whether `shown` verify among themselves ("" when none is chained)."""
        stored = [entry.stored() for entry in shown]
        return page_check(self.key, self.writer.config.ring, stored)

    async def last_id(self) -> str:
        """The id of the newest entry, "0-0" when the stream is empty: where following starts."""
        return await last_id(self.redis, self.key)

    async def newest(
        self, count: int, since_ms: int | None = None, until: str = "+"
    ) -> list[AuditEntry]:
        """The newest `count` entries (at or after `since_ms`, up to id `until`), oldest first."""
        low = "-" if since_ms is None else str(since_ms)
        raw = await self.redis.xrevrange(self.key, max=until, min=low, count=count)
        return [AuditEntry.from_stream(i, f) for i, f in reversed(entries(raw))]

    async def since(self, since_ms: int, until: str = "+") -> AsyncIterator[AuditEntry]:
        """Every entry at or after `since_ms` (up to id `until`), oldest first, read in pages."""
        low = str(since_ms)
        while True:
            page = entries(await self.redis.xrange(self.key, min=low, max=until, count=PAGE))
            for entry_id, fields in page:
                yield AuditEntry.from_stream(entry_id, fields)
            if len(page) < PAGE:
                return
            low = "(" + page[-1][0]

    async def backwards(self) -> AsyncIterator[AuditEntry]:
        """Every entry from the newest back, read in pages (a lookup that usually ends soon)."""
        high = "+"
        while True:
            page = entries(await self.redis.xrevrange(self.key, max=high, min="-", count=PAGE))
            for entry_id, fields in page:
                yield AuditEntry.from_stream(entry_id, fields)
            if len(page) < PAGE:
                return
            high = "(" + page[-1][0]

    async def follow(
        self, after: str, block_ms: int = 1000, stop: asyncio.Event | None = None
    ) -> AsyncIterator[AuditEntry]:
        """Entries appended after id `after`, as they come (XREAD BLOCK), until `stop` is set
        (seen within `block_ms`, even if a cancellation got lost in the client)."""
        last = after
        while stop is None or not stop.is_set():
            for entry_id, fields in await read_after(self.redis, self.key, last, PAGE, block_ms):
                last = entry_id
                yield AuditEntry.from_stream(entry_id, fields)


async def _write(pending: list[tuple[AuditLog, Mapping[str, str]]]) -> None:
    """Write and empty a unit's held entries, one round trip per log."""
    if not pending:
        return
    held = list(pending)
    pending.clear()
    for log_ in dict.fromkeys(owner for owner, _ in held):
        await log_.record_many([e for owner, e in held if owner is log_])
