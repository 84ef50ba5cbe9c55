"""Approvals in Redis: records with their checkpoints, the status machine, held messages,
standing allow rules, worker liveness and the audit trail."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis

from runtime.approval import scripts
from runtime.approval.models import ApprovalRecord, ApprovalStatus, Checkpoint
from runtime.store.keys import Keys

AUDIT_MAXLEN = 100_000
# Stored once as JSON; everything else lives in hash fields the scripts update.
IMMUTABLE_FIELDS = {
    "id",
    "session",
    "conversation",
    "requester",
    "tool",
    "arguments",
    "call_id",
    "call_hash",
    "reasons",
}


@dataclass(frozen=True, slots=True)
class Transition:
    """What a status script answered: `ok`, or why not (`not_found`, `already`, `expired`,
    `wrong_conversation`, `hash_mismatch`, `wrong_status`, `not_due`, `wrong_worker`)."""

    outcome: str
    status: str | None = None  # the status found, for `already` / `wrong_status`
    decided_by: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class ApprovalStore:
    def __init__(
        self, redis: Redis, keys: Keys, timeout_s: float = 3600, grace_s: float = 7 * 86400
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.timeout_ms = int(timeout_s * 1000)
        # Records outlive their expiry so a late `/approve` hears "expired", not "unknown id".
        self.ttl_ms = self.timeout_ms + int(grace_s * 1000)
        self._create = redis.register_script(scripts.CREATE)
        self._decide = redis.register_script(scripts.DECIDE)
        self._move = redis.register_script(scripts.MOVE)
        self._hold = redis.register_script(scripts.HOLD)

    def _session_keys(self, session: str, approval_id: str) -> list[str]:
        return [
            self.keys.approval(session, approval_id),
            self.keys.pending(session),
            self.keys.session_audit(session),
        ]

    async def create(self, record: ApprovalRecord, checkpoint: Checkpoint) -> ApprovalRecord:
        """One atomic write of the record and its checkpoint; the session is marked pending."""
        # The index is written first: a crash in between leaves only a dangling pointer.
        claimed = await self.redis.set(
            self.keys.approval_index(record.id), record.session, px=self.ttl_ms, nx=True
        )
        if not claimed:
            raise RuntimeError(f"approval id collision: {record.id}")
        reply = await self._create(
            keys=self._session_keys(record.session, record.id),
            args=[
                record.id,
                record.model_dump_json(include=IMMUTABLE_FIELDS),
                checkpoint.model_dump_json(),
                record.conversation.id,
                record.call_hash,
                self.timeout_ms,
                self.ttl_ms,
                record.requester.key,
                record.tool,
            ],
        )
        if reply[0] != "ok":
            raise RuntimeError(f"approval {record.id} already exists")
        created, expires = int(reply[1]), int(reply[2])
        await self.redis.zadd(self.keys.expiring(), {record.id: expires})
        await self._mirror(record.session, "requested", record.id, record.requester.key, "pending")
        return record.model_copy(update={"created_at": created, "expires_at": expires})

    async def session_of(self, approval_id: str) -> str | None:
        value = await self.redis.get(self.keys.approval_index(approval_id))
        return None if value is None else str(value)

    async def load(self, approval_id: str) -> tuple[ApprovalRecord, Checkpoint] | None:
        session = await self.session_of(approval_id)
        if session is None:
            return None
        raw = cast(
            dict[str, str], await self.redis.hgetall(self.keys.approval(session, approval_id))
        )
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
            outcome=raw.get("outcome") or None,
            worker=raw.get("worker") or None,
        )
        if raw.get("notice"):
            fields["notice"] = json.loads(raw["notice"])
        record = ApprovalRecord.model_validate(fields)
        return record, Checkpoint.model_validate_json(raw["checkpoint"])

    async def set_notice(self, record: ApprovalRecord, notice: dict[str, str]) -> None:
        await self.redis.hset(
            self.keys.approval(record.session, record.id), "notice", json.dumps(notice)
        )

    async def decide(
        self,
        record: ApprovalRecord,
        approve: bool,
        actor: str,
        reason: str,
        conversation_id: str | None,
        expected_hash: str,
    ) -> Transition:
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
        reply = await self._decide(
            keys=self._session_keys(record.session, record.id),
            args=[record.id, status.value, actor, reason, conversation_id or "", expected_hash],
        )
        result = _transition(reply)
        if result.ok or result.outcome in ("expired", "wrong_conversation", "hash_mismatch"):
            event = status.value if result.ok else result.outcome
            await self._mirror(record.session, event, record.id, actor, reason)
        if result.ok or result.outcome == "expired":
            await self.redis.zrem(self.keys.expiring(), record.id)
        return result

    async def move(
        self,
        record: ApprovalRecord,
        source: ApprovalStatus,
        target: ApprovalStatus,
        actor: str,
        *,
        overdue_only: bool = False,
        worker: str = "",
        release: bool = False,
        fields: dict[str, str] | None = None,
    ) -> Transition:
        pairs = [item for kv in (fields or {}).items() for item in kv]
        reply = await self._move(
            keys=self._session_keys(record.session, record.id),
            args=[
                record.id,
                source.value,
                target.value,
                actor,
                "1" if overdue_only else "0",
                worker,
                "1" if release else "0",
                *pairs,
            ],
        )
        result = _transition(reply)
        if result.ok:
            await self._mirror(record.session, target.value, record.id, actor, str(fields or ""))
        return result

    async def claim(self, record: ApprovalRecord, worker: str) -> Transition:
        """approved -> executing, recorded before the side effect happens."""
        result = await self.move(
            record,
            ApprovalStatus.APPROVED,
            ApprovalStatus.EXECUTING,
            worker,
            fields={"worker": worker},
        )
        if result.ok:
            await self.redis.zadd(self.keys.executing(), {record.id: 0})
        return result

    async def consume(self, record: ApprovalRecord, outcome: str) -> Transition:
        result = await self.move(
            record,
            ApprovalStatus.EXECUTING,
            ApprovalStatus.CONSUMED,
            "runtime",
            release=True,
            fields={"outcome": outcome},
        )
        await self.redis.zrem(self.keys.executing(), record.id)
        return result

    async def expire(self, record: ApprovalRecord) -> Transition:
        result = await self.move(
            record,
            ApprovalStatus.PENDING,
            ApprovalStatus.EXPIRED,
            "sweeper",
            overdue_only=True,
            release=True,
        )
        if result.outcome in ("ok", "wrong_status", "not_found"):
            await self.redis.zrem(self.keys.expiring(), record.id)
        return result

    async def mark_outcome_unknown(self, record: ApprovalRecord, dead_worker: str) -> Transition:
        result = await self.move(
            record,
            ApprovalStatus.EXECUTING,
            ApprovalStatus.OUTCOME_UNKNOWN,
            "recovery",
            worker=dead_worker,
            release=True,
            fields={"outcome": f"unknown: worker {dead_worker} stopped while executing"},
        )
        if result.outcome != "wrong_worker":
            await self.redis.zrem(self.keys.executing(), record.id)
        return result

    # --- sweeping ---------------------------------------------------------------------------

    async def overdue_ids(self, now_ms: int) -> list[str]:
        return [str(i) for i in await self.redis.zrangebyscore(self.keys.expiring(), 0, now_ms)]

    async def open_ids(self) -> list[str]:
        pending = await self.redis.zrange(self.keys.expiring(), 0, -1)
        executing = await self.redis.zrange(self.keys.executing(), 0, -1)
        return [str(i) for i in [*pending, *executing]]

    async def executing_ids(self) -> list[str]:
        return [str(i) for i in await self.redis.zrange(self.keys.executing(), 0, -1)]

    async def server_time_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # --- liveness of the processes that execute approved calls -----------------------------

    async def heartbeat(self, worker: str, ttl_s: float) -> None:
        await self.redis.set(self.keys.worker(worker), "alive", px=int(ttl_s * 1000))

    async def worker_alive(self, worker: str) -> bool:
        return bool(await self.redis.exists(self.keys.worker(worker)))

    async def retire(self, worker: str) -> None:
        await self.redis.delete(self.keys.worker(worker))

    # --- held messages ----------------------------------------------------------------------

    async def hold(self, session: str, message: str) -> tuple[int, str]:
        """(queue length, pending approval id) if held; (0, "") when nothing is pending."""
        reply = await self._hold(
            keys=[self.keys.pending(session), self.keys.held(session)],
            args=[message, self.ttl_ms],
        )
        return int(reply[0]), str(reply[1])

    async def pop_held(self, session: str) -> str | None:
        value = await self.redis.lpop(self.keys.held(session))
        return None if value is None else str(value)

    async def pending_id(self, session: str) -> str | None:
        value = await self.redis.get(self.keys.pending(session))
        return None if value is None else str(value)

    # --- standing "approve always" rules ---------------------------------------------------

    async def add_rule(self, conversation_id: str, rule: str, actor: str, session: str) -> None:
        await self.redis.sadd(self.keys.rules(conversation_id), rule)
        await self.audit(session, "rule_added", "", actor, f"{conversation_id}: {rule}")

    async def has_rule(self, conversation_id: str, rule: str) -> bool:
        return bool(await self.redis.sismember(self.keys.rules(conversation_id), rule))

    # --- audit ------------------------------------------------------------------------------

    async def audit(self, session: str, event: str, approval_id: str, actor: str, why: str) -> None:
        """Something the scripts did not record themselves (refusals decided in Python)."""
        fields = {"event": event, "approval": approval_id, "actor": actor, "status": why}
        await self.redis.xadd(self.keys.session_audit(session), fields)  # type: ignore[arg-type]
        await self._mirror(session, event, approval_id, actor, why)

    async def _mirror(
        self, session: str, event: str, approval_id: str, actor: str, detail: str
    ) -> None:
        """The global audit stream, for tailing across sessions; each session's own stream is
        written atomically with the transition itself."""
        fields = {
            "event": event,
            "session": session,
            "approval": approval_id,
            "actor": actor,
            "detail": detail,
        }
        await self.redis.xadd(
            self.keys.audit(),
            fields,  # type: ignore[arg-type]
            maxlen=AUDIT_MAXLEN,
            approximate=True,
        )

    async def audit_entries(self, session: str) -> list[dict[str, str]]:
        entries = cast(
            list[tuple[str, dict[str, str]]],
            await self.redis.xrange(self.keys.session_audit(session)),
        )
        return [fields for _, fields in entries]


def _transition(reply: list[Any]) -> Transition:
    outcome = str(reply[0])
    status = str(reply[1]) if len(reply) > 1 and outcome != "ok" else None
    decided_by = str(reply[2]) if len(reply) > 2 and reply[2] else None
    return Transition(outcome, status, decided_by)
