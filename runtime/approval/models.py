"""Approval records and checkpoints: what is stored in Redis while a run waits for a human."""

from __future__ import annotations

import hashlib
import re
import secrets
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, model_validator

from runtime.canonical import canonical_json
from runtime.models import Actor, ConversationRef, ToolCall, ToolResult, UserMessage

# No 0/1/i/l/o: ids are read off a screen and typed back.
ID_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"
ID_LENGTH = 13  # 31**13 > 2**64


def new_approval_id() -> str:
    # One draw (one urandom read), written in base 31: a `secrets.choice` per character
    # read the OS's random source 13 times.
    n = secrets.randbelow(len(ID_ALPHABET) ** ID_LENGTH)
    digits = []
    for _ in range(ID_LENGTH):
        n, digit = divmod(n, len(ID_ALPHABET))
        digits.append(ID_ALPHABET[digit])
    return "".join(digits)


# The shape of stored checkpoints and records. 1: wave 1 (no version field). 2: the version
# field itself. 3: a record's tool signature and what its "approve always" covers. 4: a
# record's kind (a question to the requester, with its options, and its answer). 5: a
# checkpoint's `batch` (the approvals a model turn's calls are put to together). A reader
# upgrades older versions and refuses newer ones (a rolling deploy must not let an old
# process misread what a new one wrote).
SCHEMA_VERSION = 5
# How a version-2 record of an MCP tool named its signature: in its risk reasons.
_OLD_SIGNATURE = re.compile(r"tool signature ([0-9a-f]{10})\b")
LEGACY_NO_ALWAYS = "requested before this clawgate version named what an always would cover"


class AlwaysCover(StrEnum):
    """What an "approve always" of the call would let run later without asking."""

    RULE = "rule"  # calls with the same standing rule (runtime/risk/signature.py)
    EXACT = "exact"  # this tool with these exact arguments (an MCP tool)
    ANY = "any"  # this tool with any arguments (an MCP tool an admin said may be generalized)
    NEVER = "never"  # nothing: approved once only (`no_always` says why)


class Versioned(BaseModel):
    schema_version: int = SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {version!r} was written by a newer clawgate "
                f"(this one reads up to {SCHEMA_VERSION}); upgrade this process"
            )
        # 1 -> 2, 3 -> 4 and 4 -> 5 added only fields with defaults. 2 -> 3: an MCP tool's signature
        # moves out of the reasons into its own field; what an "always" would have covered
        # was never shown, so such a record is approved once only.
        # (A record made in code names its `always`: only stored ones lack it.)
        if version < 3 and "always" not in data and "." in str(data.get("tool", "")):
            found = (_OLD_SIGNATURE.search(r) for r in map(str, data.get("reasons", ())))
            signature = next((m[1] for m in found if m), None)
            data = {**data, "signature": signature, "always": AlwaysCover.NEVER}
            data.setdefault("no_always", LEGACY_NO_ALWAYS)
        return {**data, "schema_version": SCHEMA_VERSION}


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    EXECUTING = "executing"
    CONSUMED = "consumed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    ANSWERED = "answered"  # a question's: its answer is the call's result


class Kind(StrEnum):
    """An approval of a call, or a question to the requester (the `clarify` tool), which
    waits, expires and resumes the same way but is answered by the requester alone."""

    APPROVAL = "approval"
    QUESTION = "question"


class Checkpoint(Versioned):
    """Everything needed to continue a suspended run in any process.

    History is not copied: `history_len` marks where the run stood in the session's
    append-only history, so a checkpoint costs the same with 10 or 10,000 prior messages."""

    id: str
    session: str
    conversation: ConversationRef
    actor: Actor
    step: int
    calls: list[ToolCall]
    index: int  # the suspended call
    prior_results: list[ToolResult] = Field(default_factory=list)
    history_len: int
    trace_id: str | None = None  # the suspended run's trace: a resumed run's trace links to it
    trace_origin: str | None = None  # the first trace of the run (see TraceLink.origin)
    edit: str | None = None  # an approver changed the call's arguments: the diff, for the model
    # A batch: the ids of the approvals of this turn's calls, in the model's order (the first
    # is its lead, which the session waits for); each approval holds a copy whose `index` is
    # its own call. Empty: one approval alone. `prior_results` end where the batch starts.
    batch: list[str] = Field(default_factory=list)

    @property
    def start(self) -> int:
        """The batch's first call (results before it are in `prior_results`)."""
        return len(self.prior_results)


class ApprovalRecord(Versioned):
    id: str
    session: str
    conversation: ConversationRef
    requester: Actor
    tool: str
    arguments: str  # canonical JSON of the validated arguments
    call_id: str
    call_hash: str
    reasons: list[str]
    quorum: int = 1  # distinct approvers the call needs (the N-person rule)
    # The tool's own version the call was judged with (an MCP tool's listing signature): an
    # approved call runs, and a grant covers, only that version.
    signature: str | None = None
    always: AlwaysCover = AlwaysCover.RULE
    no_always: str | None = None  # why "approve always" is not offered (always = never)
    # Files the agent changed without approval since the session's last decided approval
    # (runtime/approval/changes.py), shown in the notice; `unapproved_more`: and older ones.
    unapproved_changes: list[str] = Field(default_factory=list)
    unapproved_more: bool = False
    # What the call runs with once approved (the bash sandbox's wider view), for the notice.
    runs_with: str | None = None
    routes: list[str] = Field(default_factory=list)  # where the request is posted too
    remind_after_ms: int | None = None  # bring it up again when still pending this long
    escalate_after_ms: int | None = None  # then `escalate_to` may decide it too
    escalate_to: list[str] = Field(default_factory=list)
    reminded: bool = False
    escalated: bool = False
    copies: list[dict[str, str]] = Field(default_factory=list)  # those posts: conversation, ref
    approved_by: list[str] = Field(default_factory=list)  # so far, while it needs more
    status: ApprovalStatus = ApprovalStatus.PENDING
    created_at: int = 0  # ms, Redis server time
    expires_at: int = 0
    decided_by: str | None = None
    decided_at: int | None = None
    reason: str | None = None
    outcome: str | None = None
    worker: str | None = None  # the process that executes (or executed) the approved call
    version: int = 1
    notice: dict[str, str] = Field(default_factory=dict)  # the adapter's ref to the notice
    notified: bool = False  # the notice was posted (a retaken run posts it otherwise)
    kind: Kind = Kind.APPROVAL
    question: str = ""  # a question's, with its options and whether other words may answer it
    options: list[str] = Field(default_factory=list)
    allow_other: bool = False
    answer: str | None = None  # a question's answer, recorded with the decision

    @property
    def is_question(self) -> bool:
        return self.kind is Kind.QUESTION


def call_hash(tool: str, arguments: str, call_id: str, session: str, checkpoint_id: str) -> str:
    """Binds an approval to one exact call in one exact suspended run."""
    payload = canonical_json(
        {
            "tool": tool,
            "arguments": arguments,
            "call_id": call_id,
            "session": session,
            "checkpoint": checkpoint_id,
        }
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def checkpoint_call_hash(checkpoint: Checkpoint, arguments: str) -> str:
    """The hash of the checkpoint's suspended call, whose canonical `arguments` are given."""
    call = checkpoint.calls[checkpoint.index]
    return call_hash(call.name, arguments, call.id, checkpoint.session, checkpoint.id)


class HeldMessage(BaseModel):
    """A message that arrived while its session waited for a decision; it runs afterwards."""

    text: str
    actor: Actor
    conversation: ConversationRef
    job: str = ""  # its inbox entry: the id of its run (runtime/store/runs.py)
    images: tuple[str, ...] = ()  # attached images, paths in the work dir (UserMessage.images)

    def user_message(self) -> UserMessage:
        return UserMessage(content=self.text, actor=self.actor.key, images=list(self.images))
