"""The audit trail's hash chain: every entry of the global stream carries its position (`seq`),
the key id it is sealed with (`kid`), the previous entry's MAC (`prev`) and its own `mac`, an
HMAC over all of that and every other field; an entry with a `session` field also carries its
place in that session's sub-chain (`sseq`, `sprev`). Whoever lacks the key cannot change,
insert, delete or reorder entries without `clawgate audit verify` seeing a broken link
(runtime/audit_verify.py). The key never leaves the process: Redis holds only MACs.

Appending is compare-and-set in one Lua script: the process keeps the head it last saw (seq,
mac, and the heads of the sessions it wrote), seals a batch against it and the script appends
only if the head is still that; otherwise it answers the current head and the batch is sealed
again (bounded, with jitter). One EVALSHA per batch when the cached head is right; concurrent
batches of one process are written together (group commit), so they never race each other.

The head key also holds `hmac`, a MAC over (seq, mac): a head rewound to an older entry's
values is caught unless that older head itself was copied before (a signed checkpoint kept
outside Redis catches that too). Every `checkpoint_every` entries the batch crossing the
boundary adds an `audit_checkpoint` entry (count, head MAC, time, signature), also appended as
a JSON line to `checkpoint_file` when set.

A head key that vanished while the stream still holds chained entries (evicted, deleted) is
rebuilt from the newest entry, and an `audit_head_rebuilt` entry says so in the chain: entries
deleted from the end before that cannot be ruled out by the chain alone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from runtime.canonical import canonical_json
from runtime.evidence_keys import UNKEYED, KeyRing, encode
from runtime.store.keys import Keys

log = logging.getLogger(__name__)
CHAIN_FIELDS = ("seq", "kid", "prev", "mac", "sseq", "sprev")
CHECKPOINT = "audit_checkpoint"
HEAD_REBUILT = "audit_head_rebuilt"
DEFAULT_CHECKPOINT_EVERY = 1000
ATTEMPTS = 12  # seals of one batch before it is given up (the head moved every time)
PRUNE_MAX = 5000  # session heads dropped at most per checkpoint (Lua's unpack takes ~8000)
SESSION_CACHE = 4096  # session heads a process remembers (a miss costs one more round trip)

# KEYS: stream, head, session heads, session last seq (one slot: keys.py)
# ARGV: maxlen, expected seq, expected mac, new seq, new mac, kid, head hmac, prune (how many
#       session heads at most to drop: those whose entries are all trimmed), session count S,
#       then per session: its id, expected head ("sseq mac", "" for none), new head, last seq;
#       then per entry its field count and field/value pairs.
# Answers {'ok'}, or {'moved', seq, mac, kid, hmac, lost, session, head, ...}: the current head
# (lost = '1': the head key is gone and these are the newest entry's).
APPEND = """
local seq, mac, kid, hmac, lost = '0', '', '', '', '0'
local h = redis.call('HMGET', KEYS[2], 'seq', 'mac', 'kid', 'hmac')
if h[1] then
  seq, mac, kid, hmac = h[1], h[2] or '', h[3] or '', h[4] or ''
else
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
  if last then
    local f = last[2]
    for i = 1, #f, 2 do
      if f[i] == 'seq' then seq, lost = f[i + 1], '1' elseif f[i] == 'mac' then mac = f[i + 1] end
    end
  end
end
local ok = seq == ARGV[2] and mac == ARGV[3]
local sessions = tonumber(ARGV[9])
local reply = {}
local at = 10
for i = 1, sessions do
  local cur = redis.call('HGET', KEYS[3], ARGV[at]) or ''
  if cur ~= ARGV[at + 1] then ok = false end
  reply[#reply + 1] = ARGV[at]
  reply[#reply + 1] = cur
  at = at + 4
end
if not ok then return {'moved', seq, mac, kid, hmac, lost, unpack(reply)} end
while at <= #ARGV do
  local n = tonumber(ARGV[at])
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, at + 1, at + n))
  at = at + n + 1
end
redis.call('HSET', KEYS[2], 'seq', ARGV[4], 'mac', ARGV[5], 'kid', ARGV[6], 'hmac', ARGV[7])
at = 10
for i = 1, sessions do
  redis.call('HSET', KEYS[3], ARGV[at], ARGV[at + 2])
  redis.call('ZADD', KEYS[4], ARGV[at + 3], ARGV[at])
  at = at + 4
end
-- Session heads whose entries were all trimmed away go: the session starts a new sub-chain.
local first = ARGV[8] ~= '0' and redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
if first then
  local f = first[2]
  for i = 1, #f, 2 do
    if f[i] == 'seq' then
      local below = '(' .. f[i + 1]
      local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', below, 'LIMIT', 0, ARGV[8])
      if #gone > 0 then
        redis.call('ZREM', KEYS[4], unpack(gone))
        redis.call('HDEL', KEYS[3], unpack(gone))
      end
    end
  end
end
return {'ok'}
"""


@dataclass(frozen=True)
class ChainConfig:
    """The ring entries are sealed with (its current key), how often a checkpoint is added,
    and the file checkpoints are also appended to (None: only the stream holds them)."""

    ring: KeyRing = field(default_factory=KeyRing)
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY
    checkpoint_file: Path | None = None


def entry_message(stream: str, fields: Mapping[str, str]) -> bytes:
    """What an entry's `mac` is the MAC of: the stream's name (no entry moves to another
    trail), `prev`, `seq`, then every other field but `mac` as canonical JSON (sorted keys:
    one text per set of fields, and a C encoder where a loop over pairs made verifying 100,000
    entries twice as slow)."""
    rest = {k: v for k, v in fields.items() if k not in ("mac", "prev", "seq")}
    return encode(
        "audit", stream, fields.get("prev", ""), fields.get("seq", ""), canonical_json(rest)
    )


def head_message(stream: str, seq: int, mac: str) -> bytes:
    return encode("head", stream, str(seq), mac)


def checkpoint_message(stream: str, count: int, head: str, at: str) -> bytes:
    return encode("checkpoint", stream, str(count), head, at)


def session_head(sseq: int, mac: str) -> str:
    """A session head as the script compares it."""
    return f"{sseq} {mac}" if sseq else ""


def parse_session_head(text: str) -> tuple[int, str]:
    sseq, _, mac = text.partition(" ")
    return (int(sseq), mac) if sseq.isdigit() else (0, "")


def _own(event: str, at: str, **fields: str) -> dict[str, str]:
    """An entry the chain adds itself (as runtime/audit.py builds them: actor, trace, at)."""
    return {**fields, "actor": "runtime", "trace": "", "event": event, "at": at}


def _now_ms() -> str:
    return str(int(time.time() * 1000))


@dataclass
class Sealed:
    """A batch sealed against a head: the entries as written, the new heads, and what the
    script must find for it to append them."""

    entries: list[dict[str, str]]
    seq: int
    mac: str
    expected_sessions: dict[str, str]
    sessions: dict[str, tuple[int, str, int]]  # session -> sseq, mac, chain seq of its entry
    checkpoints: list[dict[str, Any]]  # the lines of a checkpoint file


def seal(
    stream: str,
    config: ChainConfig,
    batch: Iterable[Mapping[str, str]],
    head: tuple[int, str],
    known: Mapping[str, tuple[int, str]],
) -> Sealed:
    """Chain `batch` after `head` (seq, mac); `known`: the session heads to expect (a session
    not in it is expected to have none)."""
    ring, (seq, prev) = config.ring, head
    sealed = Sealed([], seq, prev, {}, {}, [])
    pending = deque(batch)
    while pending:
        fields = {k: v for k, v in pending.popleft().items() if k not in CHAIN_FIELDS}
        seq += 1
        fields.update(seq=str(seq), kid=ring.current, prev=prev)
        session = fields.get("session")
        if session:
            if session not in sealed.sessions:
                sseq, smac = known.get(session, (0, ""))
                sealed.expected_sessions[session] = session_head(sseq, smac)
            else:
                sseq, smac, _ = sealed.sessions[session]
            fields.update(sseq=str(sseq + 1), sprev=smac)
        fields["mac"] = prev = ring.mac(entry_message(stream, fields))
        if session:
            sealed.sessions[session] = (sseq + 1, prev, seq)
        sealed.entries.append(fields)
        if seq % config.checkpoint_every == 0:
            at = _now_ms()
            sig = ring.mac(checkpoint_message(stream, seq, prev, at))
            pending.appendleft(_own(CHECKPOINT, at, count=str(seq), head=prev, sig=sig))
            sealed.checkpoints.append(
                {
                    "stream": stream,
                    "seq": seq,
                    "mac": prev,
                    "at": at,
                    "kid": ring.current,
                    "sig": sig,
                }
            )
    sealed.seq, sealed.mac = seq, prev
    return sealed


class HeadKeptMoving(Exception):
    """Other writers moved the head before every one of this batch's attempts."""


class ChainWriter:
    """Appends sealed batches to one stream; one per AuditLog (a process may hold several:
    they compare-and-set like separate processes)."""

    def __init__(self, redis: Redis, keys: Keys, maxlen: int, config: ChainConfig) -> None:
        self.config = config
        self.maxlen = maxlen
        self.stream = keys.audit()
        self._keys = [
            self.stream,
            keys.audit_head(),
            keys.audit_session_heads(),
            keys.audit_session_last(),
        ]
        self._append = redis.register_script(APPEND)
        self._head: tuple[int, str] = (-1, "")  # unknown until the first answer
        self._sessions: OrderedDict[str, tuple[int, str]] = OrderedDict()
        self._lock = asyncio.Lock()
        self._queue: list[Mapping[str, str]] = []
        self._queued = 0
        self._taken = 0
        self.warnings: list[str] = []  # about the head found, each said once
        self._writing: set[asyncio.Task[None]] = set()

    async def append(self, entries: Sequence[Mapping[str, str]]) -> None:
        """Append `entries` with whatever other tasks of this process queued meanwhile, in one
        round trip. Never raises: a failure is logged with the batch's events. A caller
        cancelled meanwhile does not cancel the write (the batch holds others' entries)."""
        self._queue.extend(entries)
        self._queued += len(entries)
        ticket = self._queued
        async with self._lock:
            if self._taken >= ticket:
                return  # written by the batch before
            alone = self._taken == ticket - len(entries) and self._queued == ticket
            batch, self._queue, self._taken = self._queue, [], self._queued
            if alone:  # only this caller's entries: its cancellation may take them along
                await self._guarded(batch)
                return
            task = asyncio.ensure_future(self._guarded(batch))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)
            await asyncio.shield(task)

    async def _guarded(self, batch: list[Mapping[str, str]]) -> None:
        try:
            await self._write(batch)
        except Exception as exc:
            log.warning(
                "audit: %d entr%s (%s) not recorded: %s: %s",
                len(batch),
                "y" if len(batch) == 1 else "ies",
                ", ".join(sorted({e.get("event", "?") for e in batch})),
                type(exc).__name__,
                exc,
            )

    async def _write(self, batch: list[Mapping[str, str]]) -> None:
        rebuilt: list[Mapping[str, str]] = []
        for attempt in range(ATTEMPTS):
            known = {s: self._sessions[s] for s in _sessions_of(batch) if s in self._sessions}
            sealed = seal(self.stream, self.config, [*rebuilt, *batch], self._head, known)
            reply = await self._append(keys=self._keys, args=self._args(sealed))
            if reply[0] == "ok":
                self._commit(sealed)
                if sealed.checkpoints and self.config.checkpoint_file is not None:
                    await self._keep(self.config.checkpoint_file, sealed.checkpoints)
                return
            rebuilt = self._moved([str(item) for item in reply[1:]])
            if attempt:  # the answer was fresh and still lost: others are writing, back off
                await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))  # noqa: S311 - jitter
        raise HeadKeptMoving(f"the chain's head moved {ATTEMPTS} times in a row")

    async def _keep(self, path: Path, checkpoints: list[dict[str, Any]]) -> None:
        """The external copy of checkpoints: a failure is said, the entries stand."""
        try:
            await asyncio.to_thread(_append_lines, path, checkpoints)
        except OSError as exc:
            log.warning("audit: checkpoint not kept in %s: %s", path, exc.strerror or exc)

    def _args(self, sealed: Sealed) -> list[Any]:
        ring, (seq, mac) = self.config.ring, self._head
        hmac = ring.mac(head_message(self.stream, sealed.seq, sealed.mac))
        args: list[Any] = [self.maxlen, str(seq), mac, str(sealed.seq), sealed.mac]
        # Heads are pruned with each checkpoint: at most one new session per entry since.
        prune = min(self.config.checkpoint_every * len(sealed.checkpoints), PRUNE_MAX)
        args += [ring.current, hmac, prune, len(sealed.sessions)]
        for session, (sseq, smac, last) in sealed.sessions.items():
            args += [session, sealed.expected_sessions[session], session_head(sseq, smac), last]
        for fields in sealed.entries:
            flat = [item for pair in fields.items() for item in pair]
            args += [len(flat), *flat]
        return args

    def _commit(self, sealed: Sealed) -> None:
        self._head = (sealed.seq, sealed.mac)
        for session, (sseq, smac, _) in sealed.sessions.items():
            self._remember(session, (sseq, smac))

    def _remember(self, session: str, head: tuple[int, str]) -> None:
        self._sessions[session] = head
        self._sessions.move_to_end(session)
        while len(self._sessions) > SESSION_CACHE:
            self._sessions.popitem(last=False)

    def _moved(self, reply: list[str]) -> list[Mapping[str, str]]:
        """Take the head the script answered; the entry that says a lost head was rebuilt
        (to go first in the batch), if it was lost."""
        seq, mac, kid, hmac, lost, *pairs = reply
        self._head = (int(seq), mac)
        for session, text in zip(pairs[::2], pairs[1::2], strict=True):
            self._remember(session, parse_session_head(text))
        self._check_head(int(seq), mac, kid, hmac, lost == "1")
        return [_own(HEAD_REBUILT, _now_ms(), after=seq)] if lost == "1" else []

    def _check_head(self, seq: int, mac: str, kid: str, hmac: str, lost: bool) -> None:
        ring = self.config.ring
        if lost:
            self._warn(f"the audit chain's head key was gone: rebuilt from entry seq {seq}")
        elif (
            seq
            and kid in ring.keys
            and not ring.check(head_message(self.stream, seq, mac), hmac, kid)
        ):
            self._warn("the audit chain's head does not verify: it was changed outside clawgate")
        if seq and not ring.keyed and kid not in ("", UNKEYED):
            self._warn("unkeyed audit entries follow keyed ones: set CLAWGATE_AUDIT_KEY here too")

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)
            log.warning("audit: %s", text)


def _sessions_of(batch: Iterable[Mapping[str, str]]) -> set[str]:
    return {s for fields in batch if (s := fields.get("session"))}


def _append_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
