"""What a tool is: a name, a pydantic argument model, and an async `run`."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from runtime.models import Actor, ConversationRef, ToolSpec
from runtime.redact import one_line
from runtime.tools.sandbox import Access

if TYPE_CHECKING:
    from runtime.channel import Event, MessageRef
    from runtime.policy.resolve import EffectivePolicy
    from runtime.risk.policy import RiskDecision


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)


A = TypeVar("A", bound=ToolArgs)


@dataclass(slots=True)
class ToolContext:
    """What a running tool may know about its run."""

    session: str
    workdir: Path
    actor: Actor | None = None
    conversation: ConversationRef | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    # The conversation's policy as of the current model step (set by the runtime).
    policy: EffectivePolicy | None = None
    # What this call was granted: read-only unless a human approved it (approval middleware).
    access: Access = Access.READ_ONLY
    # Deliver an event to the run's conversation and get the ref of what was posted (the
    # send_file tool); None where nothing is delivered (an explorer's child).
    post: Callable[[Event], Awaitable[MessageRef | None]] | None = None
    # The call being run (set by the executor for each call): a stable key of its effects.
    call_id: str = ""
    # The run was retaken after its process died: an effect keyed by the call may be there.
    retaken: bool = False


@dataclass(frozen=True, slots=True)
class ToolOutput:
    text: str
    display: str | None = None
    # More fields for the call's audit entry (send_file: the file's sha256), never secrets.
    audit: Mapping[str, str] = field(default_factory=dict)
    # A call that ran but failed at what it was for (a command that timed out), as a code for
    # traces and the audit trail (runtime/error_codes.py).
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class Effects:
    """What one call may change, recorded before it starts (the run journal's mark, see
    runtime/store/runs.py) so that a retake in any process can tell, should this process die
    while it runs, whether it may simply run again."""

    kind: str  # for people and figures: "read", "bash-sandboxed", "bash-approved", "write"
    # It cannot have changed anything (or its effect lands once however often it runs): run
    # again by a retake rather than ended "outcome unknown".
    again: bool


class ToolError(Exception):
    """An expected failure (missing file, ambiguous edit); its message is shown to the model.
    `code`: a short machine code for traces and the audit trail (runtime/error_codes.py)."""

    def __init__(self, message: str, code: str = "tool_failed") -> None:
        super().__init__(message)
        self.code = code


class ToolCancelled(ToolError):
    """The run was cancelled while the tool worked; its message says what was done."""


class Tool(ABC, Generic[A]):
    # Class attributes of the built-in tools; an MCP tool (runtime.mcp) sets its own.
    name: str
    description: str
    args_model: type[A]
    # Safe to run concurrently with its neighbours: no side effects, never needs approval.
    parallel_safe: ClassVar[bool] = False
    # Its effect is keyed by the call (`ToolContext.call_id`) and lands once however often
    # it runs (the channel looks for it first when `ToolContext.retaken`): a call of it that
    # a process died running is run again when the run is retaken, not left unknown.
    keyed: ClassVar[bool] = False
    # No call of it changes anything (a read, a question), whatever its access: like
    # `parallel_safe`, though it may not run beside others (it costs model calls, or waits).
    side_effect_free: ClassVar[bool] = False
    # Calling it again with the same arguments and getting the same result is how it is used
    # (a status check while waiting): never taken for a loop (runtime/repeats.py). An MCP
    # tool is marked by CLAWGATE_POLLING_TOOLS instead.
    polling: ClassVar[bool] = False

    @abstractmethod
    async def run(self, args: A, ctx: ToolContext) -> ToolOutput: ...

    def effects(self, ctx: ToolContext) -> Effects:
        """What a call of it run with `ctx` (its access: the approval middleware's) may
        change; a tool whose calls differ (bash: by its sandbox view) says per call."""
        again = self.parallel_safe or self.side_effect_free or self.keyed
        return Effects(self.name, again)

    def uncontained(self) -> str | None:
        """Why this tool cannot be contained here, so that no call of it may run without a
        human; None when it can (or needs no containment)."""
        return None

    def judge(
        self, arguments: Mapping[str, Any], safe_tools: frozenset[str]
    ) -> RiskDecision | None:
        """This tool's own risk decision, for a tool the risk policy cannot know (an MCP
        tool); None: the risk policy's rules decide. `safe_tools`: the conversation's."""
        return None

    def approved_view(self) -> str | None:
        """What an approved call of this tool runs with, for its approval notice (the bash
        tool's sandbox view: more than an unapproved call sees); None: nothing to add."""
        return None

    @property
    def signature(self) -> str | None:
        """What a human approved besides the arguments, when the tool itself can change
        while a call waits (an MCP tool's listing); None for the built-in tools."""
        return None

    def summarize(self, args: A) -> str:
        """A one-line description of the call for progress messages."""
        return one_line(f"{self.name} {args.model_dump_json()}")

    def spec(self) -> ToolSpec:
        schema: dict[str, Any] = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)
