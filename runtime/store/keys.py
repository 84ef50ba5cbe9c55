"""Redis key names. Every key of one session carries the session as its hash tag, so
multi-key Lua scripts over one session work on Redis Cluster."""

from __future__ import annotations

import functools
import itertools
import re
import zlib

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

_SESSION_ID = re.compile(r"^[^{}\s]{1,200}$")


def check_session_id(session: str) -> str:
    if not _SESSION_ID.match(session):
        raise ValueError(f"invalid session id {session!r}: 1-200 characters, no braces or spaces")
    return session


class Keys:
    def __init__(self, prefix: str = "clawgate") -> None:
        self.prefix = prefix

    def session(self, session: str, name: str) -> str:
        return f"{self.prefix}:{{{check_session_id(session)}}}:{name}"

    def history(self, session: str) -> str:
        return self.session(session, "history")

    def run(self, session: str) -> str:
        """The run journal's mark: the latest run's job, start in history, done."""
        return self.session(session, "run")

    def runs(self, session: str) -> str:
        """The jobs whose runs entered the session (a job delivered again is no new run)."""
        return self.session(session, "jobs")

    def summary(self, session: str) -> str:
        """The context summary standing for the history a run no longer reads (upto, record)."""
        return self.session(session, "summary")

    def summaries(self, session: str) -> str:
        """Every context summary the session had, oldest first."""
        return self.session(session, "summaries")

    # Approvals: the record+checkpoint hash, the session's pending marker, its held messages
    # and its audit stream share the session's hash tag, so one Lua script can touch them all.
    def console_relay(self, session: str) -> str:
        """Lines for a `clawgate chat` terminal from runs resumed in other processes."""
        return self.session(session, "console")

    def approval(self, session: str, approval_id: str) -> str:
        return self.session(session, f"approval:{approval_id}")

    def pending(self, session: str) -> str:
        return self.session(session, "pending")

    def held(self, session: str) -> str:
        return self.session(session, "held")

    def session_audit(self, session: str) -> str:
        return self.session(session, "audit")

    # Global keys: looked up by id or scanned by the sweeper, never inside a session script.
    def approval_index(self, approval_id: str) -> str:
        return f"{self.prefix}:approval-session:{approval_id}"

    def decision_replies(self, request: str) -> str:
        """What a worker tells the decider of a decision made outside a chat (one list)."""
        return f"{self.prefix}:decision-replies:{request}"

    def expiring(self) -> str:
        return f"{self.prefix}:approvals:expiring"

    def executing(self) -> str:
        return f"{self.prefix}:approvals:executing"

    def reminders(self) -> str:
        """Pending approvals by when to remind of them or escalate them (a hint)."""
        return f"{self.prefix}:approvals:reminders"

    def audit_sessions(self) -> str:
        """Sessions with audit entries, scored by last activity: where audit tailing starts."""
        return f"{self.prefix}:audit-sessions"

    def audit(self) -> str:
        """The global audit trail (a capped stream): see runtime/audit.py."""
        return f"{self.prefix}:audit"

    # The audit chain's state (runtime/audit_chain.py) is tagged with the stream's whole name:
    # a key without braces hashes by its whole name, so these share the stream's cluster slot
    # and one script can append to the stream and move its head together.
    def audit_head(self) -> str:
        """The chain's head: seq, mac, kid and the head's own MAC (hmac)."""
        return f"{{{self.audit()}}}:head"

    def audit_session_heads(self) -> str:
        """Each session's sub-chain head in the trail: session -> "sseq mac"."""
        return f"{{{self.audit()}}}:session-heads"

    def audit_session_last(self) -> str:
        """Sessions scored by the chain seq of their newest entry: heads whose entries are all
        trimmed away are dropped by it."""
        return f"{{{self.audit()}}}:session-last"

    def policy_overrides(self) -> str:
        """Admins' runtime policy changes: field "<scope>\\x1f<tool>" -> override JSON."""
        return f"{self.prefix}:policy:overrides"

    def choices(self, conversation_id: str) -> str:
        """A conversation's mode and model (`/mode`, `/model`): field -> choice JSON."""
        return f"{self.prefix}:choices:{conversation_id}"

    def rules(self, conversation_id: str) -> str:
        return f"{self.prefix}:rules:{conversation_id}"

    # The web console's sign-in (runtime/web_access.py): one hash tag, so a session and the
    # index of sessions change in one step on a Redis Cluster too.
    def console_link(self, link_id: str) -> str:
        """A one-time sign-in link, by its public half (the secret is kept hashed)."""
        return f"{self.prefix}:{{console}}:link:{link_id}"

    def console_session(self, session_id: str) -> str:
        """A console session, by the hash of its cookie (a dump of Redis holds no cookie)."""
        return f"{self.prefix}:{{console}}:session:{session_id}"

    def console_sessions(self) -> str:
        """Console sessions by their absolute expiry (ms): `clawgate console sessions`."""
        return f"{self.prefix}:{{console}}:sessions"

    def console_attempts(self, what: str) -> str:
        """A count of one kind of attempt by one client address in the current minute."""
        return f"{self.prefix}:{{console}}:attempts:{what}"

    # Traces (runtime/tracing): one JSON document per run, and the runs that resumed it.
    def trace(self, trace_id: str) -> str:
        return f"{self.prefix}:trace:{trace_id}"

    def trace_resumed_by(self, trace_id: str) -> str:
        return f"{self.prefix}:trace:{trace_id}:resumed-by"

    # The inbox, in `partitions` partitions (CLAWGATE_INBOX_PARTITIONS): a partition's stream,
    # the lanes of its sessions, its dedupe marks and start counts share its hash tag, so the
    # enqueue and ack scripts touch one slot. Partition 0 is `{inbox}`, the one inbox there was
    # before partitions: a single Redis keeps its layout.
    def inbox_stream(self, partition: int = 0, partitions: int = 1) -> str:
        return f"{self.prefix}:{{{inbox_tag(partition, partitions)}}}:stream"

    def inbox_lane(self, lane: str, partition: int = 0, partitions: int = 1) -> str:
        tag = inbox_tag(partition, partitions)
        return f"{self.prefix}:{{{tag}}}:lane:{check_session_id(lane)}"

    def inbox_seen(self, dedupe_key: str, partition: int = 0, partitions: int = 1) -> str:
        return f"{self.prefix}:{{{inbox_tag(partition, partitions)}}}:seen:{dedupe_key}"

    def inbox_starts(self, job_id: str, partition: int = 0, partitions: int = 1) -> str:
        """How often a job taken over from a stopped worker was started."""
        return f"{self.prefix}:{{{inbox_tag(partition, partitions)}}}:starts:{job_id}"

    # Per process, not per partition: single-key scripts, wherever their slot lies.

    def inbox_suspects(self) -> str:
        """Consumers whose liveness mark lapsed, by when a worker first saw it."""
        return f"{self.prefix}:{{inbox}}:suspects"

    def inbox_workers(self) -> str:
        """Workers by the server time they last polled: /readyz of a process without one."""
        return f"{self.prefix}:{{inbox}}:workers"

    def worker(self, worker_id: str) -> str:
        return f"{self.prefix}:worker:{worker_id}"


def inbox_partition(lane: str, partitions: int) -> int:
    """The partition of a lane (a session): a stable hash (not Python's, which differs per
    process), so every process queues a session's inputs in the same partition, in order."""
    return zlib.crc32(lane.encode()) % partitions if partitions > 1 else 0


@functools.cache
def inbox_tag(partition: int, partitions: int) -> str:
    """The hash tag of a partition. Partition 0 is `inbox`; partition i of n is the first of
    `inbox-i`, `inbox-i.1`, … whose slot lies near the point i n-ths of the slot space after
    `inbox`'s: evenly spaced slots spread the partitions evenly over a cluster's masters
    (whose slot ranges redis-cli makes equal), which names like `inbox-i` alone do not."""
    if partition == 0:
        return "inbox"
    if not 0 < partition < partitions:
        raise ValueError(f"partition {partition} of {partitions}")
    spacing = REDIS_CLUSTER_HASH_SLOTS / partitions
    point = key_slot(b"inbox") + partition * spacing
    near = max(1.0, spacing / 4)
    for n in itertools.count():
        tag = f"inbox-{partition}" + (f".{n}" if n else "")
        off = (key_slot(tag.encode()) - point) % REDIS_CLUSTER_HASH_SLOTS
        if min(off, REDIS_CLUSTER_HASH_SLOTS - off) < near:
            return tag
    raise AssertionError("unreachable")
