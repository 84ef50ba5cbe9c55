"""The runtime's boundary types: conversation messages, tool calls, tool specs and results.

Everything here is a pydantic model because it crosses a boundary: it is stored in Redis,
sent to a model provider or handed to an adapter.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class ToolCall(BaseModel):
    """One tool call as the model asked for it; `arguments` is the model's raw JSON text."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class SystemMessage(BaseModel):
    model_config = ConfigDict(frozen=True)  # a message in a window never changes

    role: Literal["system"] = "system"
    content: str


class UserMessage(BaseModel):
    model_config = ConfigDict(frozen=True)  # a message in a window never changes

    role: Literal["user"] = "user"
    content: str
    actor: str | None = None
    # Images the person attached, as paths in the work dir (runtime/attachments.py): sent as
    # image parts to a model that takes images (CLAWGATE_MODEL_IMAGES), named in `content`.
    images: list[str] = Field(default_factory=list)


class AssistantMessage(BaseModel):
    model_config = ConfigDict(frozen=True)  # a message in a window never changes

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolMessage(BaseModel):
    model_config = ConfigDict(frozen=True)  # a message in a window never changes

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    status: ToolStatus


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


class ToolSpec(BaseModel):
    """What the model is shown of a tool: its JSON schema comes from the tool's argument model."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolStatus(StrEnum):
    COMPLETED = "completed"
    DENIED = "denied"
    SUSPENDED = "suspended"
    ERROR = "error"
    CANCELLED = "cancelled"


PolicyVerdict = Literal["allow", "ask", "deny"]
# Where a call's verdict came from (traces, audit): a built-in rule of clawgate, the policy
# file, an admin's override stored in Redis, the settings (CLAWGATE_ENABLED_TOOLS), the
# conversation's mode, a standing "approve always" grant, an admin hook, or a human's approval
# of this very call.
PolicySource = Literal[
    "builtin", "policy_file", "override", "settings", "mode", "grant", "hook", "approval"
]


class PolicyDecision(BaseModel):
    """The verdict on one call and where it came from; `rule` says which rule (a built-in
    rule's short name, a policy-file setting, the hooks that answered), for people."""

    model_config = ConfigDict(frozen=True)

    verdict: PolicyVerdict
    source: PolicySource
    rule: str = ""


class ToolResult(BaseModel):
    """The outcome of one tool call, in three forms.

    `model_text` goes back to the model (capped), `display` is a one-line form for chat and
    `artifact` keeps the full output when the model text had to be cut.
    """

    call_id: str
    tool: str
    status: ToolStatus
    model_text: str
    display: str
    artifact: str | None = None
    reasons: list[str] = Field(default_factory=list)  # why a call was suspended or denied
    audit: dict[str, str] = Field(default_factory=dict)  # the tool's fields for its audit entry
    # A suspended call's own terms (an admin hook's ask): the approvers it needs at least, and
    # where else its request goes (conversation ids or "dm").
    quorum: int = 1
    routes: list[str] = Field(default_factory=list)
    policy: PolicyDecision | None = None  # the verdict that let it run, asked or refused it
    # Why it failed, as a short code where the code that failed knows better than its status
    # (runtime/error_codes.py gives every failed result one).
    error_code: str | None = None

    @property
    def unfinished(self) -> bool:
        """It ran but did not finish its work (a command that timed out): no receipt."""
        return self.error_code == "timeout"

    def to_message(self) -> ToolMessage:
        return ToolMessage(
            tool_call_id=self.call_id, name=self.tool, content=self.model_text, status=self.status
        )


class StopReason(StrEnum):
    FINAL = "final"
    MAX_STEPS = "max_steps"
    APPROVAL_REQUIRED = "approval_required"
    CANCELLED = "cancelled"
    ERROR = "error"
    # The same call got the same outcome CLAWGATE_REPEAT_LIMIT times in a row (runtime/repeats.py).
    REPEATED_CALLS = "repeated_calls"


class RunResult(BaseModel):
    session: str
    stop_reason: StopReason
    steps: int
    final_text: str | None = None
    error: str | None = None
    approval_id: str | None = None  # set with approval_required: the approval it waits for
    held: bool = False  # the message was held because the session waits for a decision
    # Neither run nor held (`Runtime.run(ask=True)`): the session waits for `approval_id`; the
    # caller tells whether the message answers it, else runs it again without `ask` (held).
    asked: bool = False
    trace_id: str | None = None  # the run's trace (runtime/tracing), None when tracing is off


class Actor(BaseModel):
    """Who sent a message or a decision, e.g. `slack:U123`; `key` is what settings list."""

    model_config = ConfigDict(frozen=True)

    platform: str
    user_id: str
    name: str | None = None

    @property
    def key(self) -> str:
        return f"{self.platform}:{self.user_id}"


class ConversationRef(BaseModel):
    """Where replies go. `id` names the conversation (e.g. `slack:T1:C1`): approvals must be
    decided from the same one and standing rules are scoped to it. `data` is opaque to the
    runtime: only the adapter that made it reads it (thread, message ids)."""

    model_config = ConfigDict(frozen=True)

    platform: str
    id: str = Field(min_length=1)
    data: dict[str, str] = Field(default_factory=dict)
    direct: bool = False  # a direct message with the bot (the policy may close those)


ToolMessage.model_rebuild()
