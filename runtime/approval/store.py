"""Approvals in Redis: records with their checkpoints, the status machine, the pending mark,
grants ("approve always", grants.py), worker liveness and the audit trail.

Each session's audit stream is written by the status scripts themselves, atomically with the
transition, so it is exact. The global sorted sets (`expiring`, `executing`) are only hints for
the sweeper; they are cleaned up lazily when the sweeper finds a settled approval in them.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from runtime.approval import lua
from runtime.approval.changes import UnapprovedChanges
from runtime.approval.grants import GrantStore
from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.ownership import liveness_mark
from runtime.ownership.lease import guard
from runtime.store.history import Window, returned_window
from runtime.store.keys import Keys
from runtime.store.runs import Reads, with_reads

# Stored once as JSON; everything else lives in hash fields the scripts update.
IMMUTABLE_FIELDS = {
    "schema_version",
    "id",
    "session",
    "conversation",
    "requester",
    "tool",
    "arguments",
    "call_id",
    "call_hash",
    "reasons",
    "quorum",
    "signature",
    "always",
    "no_always",
    "unapproved_changes",
    "unapproved_more",
    "routes",
    "remind_after_ms",
    "escalate_after_ms",
    "escalate_to",
    "kind",
    "question",
    "options",
    "allow_other",
}
SESSION_CACHE_SIZE = 4096
MAX_PENDING_PER_USER = 20  # default of CLAWGATE_MAX_PENDING_PER_USER


@dataclass(frozen=True, slots=True)
class Transition:
    """What a status script answered: `ok`, or why not (`not_found`, `already`, `expired`,
    `wrong_conversation`, `hash_mismatch`, `wrong_status`, `not_due`, `wrong_worker`),
    `retaken` (the deciding job decided it before: see runtime/store/runs.py), or for the
    N-person rule `partial` (this approval counted, more are needed) and `counted` (this
    approver counted before)."""

    outcome: str
    status: str | None = None  # the status found, for `already` / `wrong_status`
    decided_by: str | None = None
    held: int = 0  # messages held in the session, when the transition released it
    approvals: int = 0  # `partial` (counted, more needed) and `counted` (this one before)
    needed: int = 1
    # An item of a batch decided: whether this decision claimed the batch's resume (`claimed`),
    # items still wait (`open`), or another claimed it (`taken`; or `again`, the deciding job
    # itself, which is told `retaken` first). "" for a single approval.
    claim: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def _transition(reply: list[Any]) -> Transition:
    outcome = str(reply[0])
    if outcome in ("partial", "counted"):  # the N-person rule: approvals so far, needed
        return Transition(outcome, approvals=int(reply[1]), needed=int(reply[2]))
    status = str(reply[1]) if len(reply) > 1 and outcome != "ok" else None
    decided_by = str(reply[2]) if len(reply) > 2 and reply[2] else None
    held = int(reply[3]) if len(reply) > 3 else 0
    claim = str(reply[6]) if len(reply) > 6 else ""
    return Transition(outcome, status, decided_by, held, claim=claim)


class ApprovalStore:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        timeout_s: float = 3600,
        grace_s: float = 7 * 86400,
        max_pending: int = MAX_PENDING_PER_USER,
    ) -> None:
        """`max_pending`: approvals one person may have waiting at once (see `pending_of`)."""
        self.redis = redis
        self.keys = keys
        self.max_pending = max_pending
        self.timeout_ms = int(timeout_s * 1000)
        # Records outlive their expiry so a late `/approve` hears "expired", not "unknown id".
        self.grace_ms = int(grace_s * 1000)
        self.ttl_ms = self.timeout_ms + self.grace_ms
        self._release = redis.register_script(lua.RELEASE)
        self._close = redis.register_script(lua.CLOSE)
        self._flag = redis.register_script(lua.FLAG)
        self._claim = redis.register_script(lua.CLAIM)
        self.grants = GrantStore(redis, keys)  # what "approve always" leaves behind
        self.changes = UnapprovedChanges(redis, keys)  # written unasked since the last decision
        # approval id -> session never changes: remembering it saves a round trip per decision.
        self._sessions: OrderedDict[str, str] = OrderedDict()
        # The reasons of approvals this process just approved: they never change once
        # decided, and the call's re-judging reads them right after (rejudge.py).
        self._reasons: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def _session_keys(self, session: str, approval_id: str) -> list[str]:
        return [
            self.keys.approval(session, approval_id),
            self.keys.pending(session),
            self.keys.session_audit(session),
            self.keys.history(session),
            self.keys.held(session),
            self.keys.run(session),
            self.keys.summary(session),
        ]

    def _pipeline(self) -> Pipeline:
        # Scripts go into pipelines as EVAL with their text: registered scripts would make
        # redis-py spend an extra SCRIPT EXISTS round trip on every execute.
        return self.redis.pipeline(transaction=False)

    async def create(
        self,
        items: Sequence[tuple[ApprovalRecord, Checkpoint]],
        messages: list[str],
        timeout_s: float | None = None,
    ) -> list[ApprovalRecord]:
        """One atomic write of the records, their checkpoints and the turn's `messages`
        appended to history (the CREATE script); the session is marked pending for the first
        (a batch's lead). The id index and the sweeper's hints travel in the same round trip:
        they live outside the session's slot. `timeout_s` is the conversation's approval
        timeout (default: the store's)."""
        timeout_ms = self.timeout_ms if timeout_s is None else int(timeout_s * 1000)
        ttl_ms = timeout_ms + self.grace_ms
        lead, checkpoint = items[0]
        session = lead.session
        await guard()
        pipe = self._pipeline()
        for record, _ in items:
            pipe.set(self.keys.approval_index(record.id), session, px=ttl_ms, nx=True)
        if checkpoint.batch:  # the batch's own id: `/approve <it>` decides every item
            pipe.set(self.keys.approval_index(checkpoint.id), session, px=ttl_ms, nx=True)
            pipe.set(self._batch(checkpoint.id), json.dumps(checkpoint.batch), px=ttl_ms)
        keys = [
            *self._session_keys(session, lead.id),
            *(self.keys.approval(session, r.id) for r, _ in items),
        ]
        fields = [
            part
            for record, copy in items
            for part in (
                record.id,
                record.model_dump_json(include=IMMUTABLE_FIELDS),
                copy.model_dump_json(),
                record.call_hash,
                record.tool,
                record.quorum,
            )
        ]
        pipe.eval(
            lua.CREATE,
            len(keys),
            *keys,
            lead.id,
            lead.conversation.id,
            timeout_ms,
            ttl_ms,
            lead.requester.key,
            len(items),
            *fields,
            *messages,
        )
        now_ms = time.time() * 1000
        by_user = self._by_user(lead.requester.key)
        for record, _ in items:
            # A hint only: the script's server-time expiry is what decisions check.
            pipe.zadd(self.keys.expiring(), {record.id: now_ms + timeout_ms})
            delays = [d for d in (record.remind_after_ms, record.escalate_after_ms) if d]
            if delays:  # when the sweeper brings it up again (see Settlement.sweep)
                pipe.zadd(self.keys.reminders(), {record.id: now_ms + min(delays)})
        # A batch is one request to look at (one notice): its lead stands for it.
        pipe.zadd(by_user, {lead.id: now_ms + timeout_ms})
        pipe.zadd(self.keys.audit_sessions(), {session: now_ms})
        pipe.pexpire(by_user, ttl_ms)
        replies = await pipe.execute()
        reply = replies[len(items) + (2 if checkpoint.batch else 0)]
        if not all(replies[: len(items)]) or reply[0] != "ok":  # 64 random bits: practically never
            raise RuntimeError(f"approval id collision: {lead.id}")
        created, expires = int(reply[1]), int(reply[2])
        for record, _ in items:
            self._remember(record.id, session)
        return [
            record.model_copy(update={"created_at": created, "expires_at": expires})
            for record, _ in items
        ]

    def _batch(self, batch_id: str) -> str:
        """A batch's approval ids, by the batch's own id."""
        return f"{self.keys.prefix}:approval-batch:{batch_id}"

    async def batch_items(self, batch_id: str) -> list[str] | None:
        """The approval ids of the batch `batch_id`, in the model's order; None: no batch."""
        value = await self.redis.get(self._batch(batch_id.strip().lower()))
        return None if value is None else [str(i) for i in json.loads(value)]

    async def load_batch(self, checkpoint: Checkpoint) -> list[tuple[ApprovalRecord, Checkpoint]]:
        """Every approval of the checkpoint's batch as it stands, in the model's order."""
        loaded = [await self.load(i) for i in checkpoint.batch]
        return [item for item in loaded if item is not None]

    async def claim(
        self, record: ApprovalRecord, checkpoint: Checkpoint, claimant: str, force: bool = False
    ) -> str:
        """Claim the resume of the record's batch for `claimant` (see lua.claim): `claimed`,
        `again`, `open` or `taken`."""
        keys = [
            *self._session_keys(record.session, record.id),
            *(self.keys.approval(record.session, i) for i in checkpoint.batch),
        ]
        args = [checkpoint.batch[0], claimant, "1" if force else "0"]
        return str(await self._claim(keys=keys, args=args))

    async def resumer(self, session: str, lead: str) -> str | None:
        """Who claimed the resume of the batch led by `lead` (None: nobody yet)."""
        value = await self.redis.hget(self.keys.approval(session, lead), "resumer")
        return None if value is None else str(value)

    def _by_user(self, user: str) -> str:
        """The approvals a person asked for, scored by when they expire (a hint)."""
        return f"{self.keys.prefix}:approvals:by-requester:{user}"

    async def pending_of(self, user: str, reads: Reads | None = None) -> int:
        """How many approvals `user` asked for are still pending, counted exactly (each
        record's status is read) once the hint reaches `max_pending`: the settled ones
        leave the hint then, so no path that settles an approval has to remember it. A
        batch counts once (its lead), while any of its items waits. `reads` ride along."""
        key = self._by_user(user)
        pipe = self._pipeline()
        pipe.zremrangebyscore(key, "-inf", time.time() * 1000)  # expired by now
        pipe.zrange(key, 0, -1)
        _, listed = await with_reads(pipe, reads)
        ids = [str(i) for i in listed]
        if len(ids) < self.max_pending:
            return len(ids)
        settled = []
        for approval_id in ids:
            loaded = await self.load(approval_id)
            if loaded is None or not await self._waits(*loaded):
                settled.append(approval_id)
        if settled:
            await self.redis.zrem(key, *settled)
        return len(ids) - len(settled)

    async def _waits(self, record: ApprovalRecord, checkpoint: Checkpoint) -> bool:
        if record.status is ApprovalStatus.PENDING:
            return True
        return bool(checkpoint.batch) and await self.resumer(record.session, record.id) is None

    def _remember(self, approval_id: str, session: str) -> None:
        self._sessions[approval_id] = session
        if len(self._sessions) > SESSION_CACHE_SIZE:
            self._sessions.popitem(last=False)

    async def session_of(self, approval_id: str) -> str | None:
        if approval_id in self._sessions:
            return self._sessions[approval_id]
        value = await self.redis.get(self.keys.approval_index(approval_id))
        if value is None:
            return None
        self._remember(approval_id, str(value))
        return str(value)

    async def reasons_of(self, approval_id: str) -> tuple[str, ...] | None:
        """What the approval was asked for (None: its record is gone)."""
        if approval_id in self._reasons:
            return self._reasons[approval_id]
        loaded = await self.load(approval_id)
        return None if loaded is None else tuple(loaded[0].reasons)

    async def load(
        self, approval_id: str, reads: Reads | None = None
    ) -> tuple[ApprovalRecord, Checkpoint] | None:
        """The approval and its checkpoint; `reads` ride the trip that reads them (taken
        only when the approval's session is known)."""
        session = await self.session_of(approval_id)
        if session is None:
            return None
        pipe = self._pipeline()
        pipe.hgetall(self.keys.approval(session, approval_id))
        (found,) = await with_reads(pipe, reads)
        raw = cast(dict[str, str], found)
        if not raw:
            return None
        fields: dict[str, Any] = json.loads(raw["record"])
        fields.update(
            status=raw["status"],
            created_at=int(raw["created_at"]),
            expires_at=int(raw["expires_at"]),
            version=int(raw["version"]),
            decided_by=raw.get("decided_by") or None,
            decided_at=int(raw["decided_at"]) if raw.get("decided_at") else None,
            reason=raw.get("reason") or None,
            answer=raw.get("answer") or None,
            outcome=raw.get("outcome") or None,
            worker=raw.get("worker") or None,
            notified=raw.get("notified") == "1",
            reminded=raw.get("reminded") == "1",
            escalated=raw.get("escalated") == "1",
            approved_by=[who for who in raw.get("approved_by", "").split(",") if who],
        )
        if raw.get("notice"):
            fields["notice"] = json.loads(raw["notice"])
        if raw.get("copies"):
            fields["copies"] = json.loads(raw["copies"])
        record = ApprovalRecord.model_validate(fields)
        return record, Checkpoint.model_validate_json(raw["checkpoint"])

    async def set_notice(
        self,
        record: ApprovalRecord,
        notice: dict[str, str],
        copies: list[dict[str, str]] | None = None,
    ) -> None:
        """The notice was posted; `notice` is the platform's reference to it (may be empty),
        `copies` those of its copies in other conversations."""
        await self.redis.hset(
            self.keys.approval(record.session, record.id),
            mapping={
                "notified": "1",
                "notice": json.dumps(notice),
                "copies": json.dumps(copies or []),
            },
        )

    # --- transitions ------------------------------------------------------------------------

    async def decide(
        self,
        record: ApprovalRecord,
        approve: bool,
        actor: str,
        reason: str,
        conversation_id: str | None,
        expected_hash: str,
        worker: str,
        liveness_ttl_s: float,
        rejection: str = "",
        last: bool = False,
        job: str = "",
        window: bool = False,
        answer: str | None = None,
        batch: Sequence[str] = (),
        seen_changes: bool = False,
    ) -> tuple[Transition, Window | None]:
        """pending -> rejected (with `rejection`, the call's result message, recorded in history
        and the session released when `last`), or pending -> approved -> executing under
        `worker` (or expired, when found overdue); `job`, the deciding job, becomes the
        session's run (`retaken` when it already decided this approval). With `window`, a
        decision made also returns the window of history the resumed run goes on with, as
        it stood right after the decision. `answer`: a question answered (pending -> answered,
        with `rejection` its result, recorded the same way). On approval the worker's liveness
        key and the sweeper's hint travel along: recovery tells a crash by the liveness key's
        absence. An item of a `batch` (its approvals' ids) stays approved (or rejected, its result
        not yet in history) until the batch's resume, which the decision leaving none pending
        claims (`Transition.claim`). `seen_changes`: a person decides it, having seen what
        changed unasked in the session (its list starts over)."""
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
        if answer is not None:
            approve, status = False, ApprovalStatus.ANSWERED
        keys = self._session_keys(record.session, record.id)
        keys += [self.keys.approval(record.session, i) for i in batch]
        pipe = self._pipeline()
        if approve and not batch:  # an item of a batch executes at its resume
            pipe.eval(liveness_mark.RENEW, 1, self.keys.worker(worker), int(liveness_ttl_s * 1000))
            pipe.zadd(self.keys.executing(), {record.id: time.time() * 1000})
        pipe.eval(
            lua.DECIDE,
            len(keys),
            *keys,
            record.id,
            status.value,
            actor,
            reason,
            conversation_id or "",
            expected_hash,
            worker,
            rejection,
            "1" if last else "0",
            job,
            answer or "",
            "1" if window else "",
        )
        if seen_changes:  # its approver saw what changed unasked: the list starts over
            self.changes.queue_reset(pipe, record.session)
        reply = (await pipe.execute())[-2 if seen_changes else -1]
        transition = _transition(reply)
        if transition.ok and approve:
            self._reasons[record.id] = tuple(record.reasons)
            if len(self._reasons) > SESSION_CACHE_SIZE:
                self._reasons.popitem(last=False)
        if not (window and transition.ok):
            return transition, None
        # The resumed run goes on from where the summary ends (it never retakes its turn).
        return transition, returned_window(reply, 7, reply[5])

    async def edit(
        self,
        record: ApprovalRecord,
        edited: ApprovalRecord,
        checkpoint: Checkpoint,
        actor: str,
        diff: str,
    ) -> Transition:
        """Replace a pending approval's call by `edited`'s (new arguments, hash, reasons and
        approvers needed; approvals counted so far are dropped), with `checkpoint`, unless it
        was decided or changed meanwhile (`already`, `hash_mismatch`)."""
        keys = self._session_keys(record.session, record.id)[:3]
        pipe = self._pipeline()
        pipe.eval(
            lua.EDIT,
            len(keys),
            *keys,
            record.id,
            record.call_hash,
            edited.call_hash,
            edited.model_dump_json(include=IMMUTABLE_FIELDS),
            checkpoint.model_dump_json(),
            edited.quorum,
            actor,
            diff,
        )
        return _transition((await pipe.execute())[-1])

    async def close(
        self, session: str, approval_id: str, messages: list[str], release: bool = True
    ) -> int:
        """Write the messages ending a settled batch and release the session (unless not
        `release`: they answer one call of a batch being resumed), but only while it still
        waits for this approval. Returns how many messages are held."""
        keys = [self.keys.pending(session), self.keys.held(session), self.keys.history(session)]
        flag = "1" if release else "0"
        return int(await self._close(keys=keys, args=[approval_id, flag, *messages]))

    async def release(self, session: str, approval_id: str) -> int:
        """The session stops waiting for this approval: call once its batch is answered in
        history. Returns how many messages are held."""
        keys = [self.keys.pending(session), self.keys.held(session)]
        return int(await self._release(keys=keys, args=[approval_id]))

    async def move(
        self,
        record: ApprovalRecord,
        source: ApprovalStatus,
        target: ApprovalStatus,
        actor: str,
        *,
        overdue_only: bool = False,
        worker: str = "",
        fields: dict[str, str] | None = None,
    ) -> Transition:
        """One status transition (the MOVE script)."""
        keys = self._session_keys(record.session, record.id)
        pairs = [item for kv in (fields or {}).items() for item in kv]
        pipe = self._pipeline()
        pipe.eval(
            lua.MOVE,
            len(keys),
            *keys,
            record.id,
            source.value,
            target.value,
            actor,
            "1" if overdue_only else "0",
            worker,
            *pairs,
        )
        return _transition((await pipe.execute())[-1])

    async def consume(
        self, record: ApprovalRecord, outcome: str, result: str, last: bool
    ) -> Transition:
        """executing -> consumed, whatever the tool did (an approval is good for one
        execution), with `result`, the call's result message, recorded in history in the same
        step; the session is released when it was the last call of its batch."""
        keys = self._session_keys(record.session, record.id)
        pipe = self._pipeline()
        pipe.eval(lua.CONSUME, len(keys), *keys, record.id, outcome, result, "1" if last else "0")
        return _transition((await pipe.execute())[-1])

    async def execute(
        self, record: ApprovalRecord, worker: str, liveness_ttl_s: float
    ) -> Transition:
        """approved -> executing under `worker`: an item of a batch, at its resume (its
        liveness and the sweeper's hint travel along, as with a decision)."""
        pipe = self._pipeline()
        pipe.eval(liveness_mark.RENEW, 1, self.keys.worker(worker), int(liveness_ttl_s * 1000))
        pipe.zadd(self.keys.executing(), {record.id: time.time() * 1000})
        await pipe.execute()
        return await self.move(
            record,
            ApprovalStatus.APPROVED,
            ApprovalStatus.EXECUTING,
            worker,
            fields={"worker": worker},
        )

    async def expire(self, record: ApprovalRecord) -> Transition:
        return await self.move(
            record,
            ApprovalStatus.PENDING,
            ApprovalStatus.EXPIRED,
            "sweeper",
            overdue_only=True,
        )

    async def mark_outcome_unknown(self, record: ApprovalRecord, dead_worker: str) -> Transition:
        """executing -> outcome_unknown: the executing process died; the call is never re-run."""
        return await self.move(
            record,
            ApprovalStatus.EXECUTING,
            ApprovalStatus.OUTCOME_UNKNOWN,
            "recovery",
            worker=dead_worker,
            fields={"outcome": f"unknown: worker {dead_worker} stopped while executing"},
        )

    # --- what the sweeper looks at ----------------------------------------------------------

    async def overdue_ids(self, now_ms: int) -> list[str]:
        return [str(i) for i in await self.redis.zrangebyscore(self.keys.expiring(), 0, now_ms)]

    async def executing_ids(self) -> list[str]:
        return [str(i) for i in await self.redis.zrange(self.keys.executing(), 0, -1)]

    async def open_ids(self) -> list[str]:
        """Candidates for pending or executing approvals (filter by the record's status)."""
        pipe = self._pipeline()
        pipe.zrange(self.keys.expiring(), 0, -1)
        pipe.zrange(self.keys.executing(), 0, -1)
        pending, executing = await pipe.execute()
        return list(dict.fromkeys(str(i) for i in [*pending, *executing]))

    async def forget(self, approval_id: str) -> None:
        """Drop a settled approval from the sweeper's hints."""
        pipe = self._pipeline()
        pipe.zrem(self.keys.expiring(), approval_id)
        pipe.zrem(self.keys.executing(), approval_id)
        pipe.zrem(self.keys.reminders(), approval_id)
        await pipe.execute()

    async def reminders_due(self, now_ms: int) -> list[str]:
        return [str(i) for i in await self.redis.zrangebyscore(self.keys.reminders(), 0, now_ms)]

    async def remind_next(self, approval_id: str, at_ms: int | None) -> None:
        """When to look at this approval's reminders again (None: never)."""
        if at_ms is None:
            await self.redis.zrem(self.keys.reminders(), approval_id)
        else:
            await self.redis.zadd(self.keys.reminders(), {approval_id: at_ms})

    async def flag(self, record: ApprovalRecord, name: str) -> bool:
        """Set `name` (reminded, escalated) on a pending approval, once: True if this call
        set it."""
        key = self.keys.approval(record.session, record.id)
        return bool(await self._flag(keys=[key], args=[name]))

    async def server_time_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # --- liveness of the processes that execute approved calls -----------------------------

    async def renew_mark(self, worker: str, ttl_s: float) -> None:
        await liveness_mark.renew(self.redis, self.keys.worker(worker), int(ttl_s * 1000))

    async def worker_alive(self, worker: str) -> bool:
        return await liveness_mark.alive(self.redis, self.keys.worker(worker))

    async def pending_id(self, session: str) -> str | None:
        value = await self.redis.get(self.keys.pending(session))
        return None if value is None else str(value)

    # --- audit ------------------------------------------------------------------------------

    async def audit(self, session: str, event: str, approval_id: str, actor: str, why: str) -> None:
        """Something the scripts did not record themselves (refusals decided in Python)."""
        fields = {
            "event": event,
            "approval": approval_id,
            "actor": actor,
            "status": why,
            "at": str(int(time.time() * 1000)),
        }
        pipe = self._pipeline()
        pipe.xadd(self.keys.session_audit(session), fields)  # type: ignore[arg-type]
        pipe.zadd(self.keys.audit_sessions(), {session: time.time() * 1000})
        await pipe.execute()

    async def audit_entries(self, session: str) -> list[dict[str, str]]:
        entries = cast(
            list[tuple[str, dict[str, str]]],
            await self.redis.xrange(self.keys.session_audit(session)),
        )
        return [fields for _, fields in entries]
