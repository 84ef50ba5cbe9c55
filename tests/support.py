"""Test helpers: a channel that records what would be posted, and a runtime built the way
`bot.wiring` builds it, on a real Redis."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
import redis.asyncio as aioredis

from runtime.agent import Runtime
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import ApprovalRequested, Event
from runtime.loop import LoopOptions
from runtime.middleware.chain import Middleware
from runtime.models import Actor, ConversationRef
from runtime.policy.model import PolicyDocument, ScopeRules
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyService
from runtime.providers.base import Provider, ProviderFactory
from runtime.runtime_config import RuntimeConfig
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tools.bash import BashTool
from runtime.tools.files import EditTool, ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import (
    NetworkAccess,
    Sandbox,
    SandboxMode,
    SandboxUnavailable,
    UnixSockets,
    probe,
)
from runtime.tracing.recorder import Tracer

E = TypeVar("E", bound=Event)
PREFIX = "cgtest"
ALICE = Actor(platform="console", user_id="alice")
ADMIN = Actor(platform="slack", user_id="UADMIN")
HERE = ConversationRef(platform="console", id="console:test")
TOOLS = ("read", "write", "edit", "bash")


class RecordingChannel:
    def __init__(self) -> None:
        self.events: list[tuple[ConversationRef, Event]] = []

    async def send(self, conversation: ConversationRef, event: Event) -> dict[str, str] | None:
        self.events.append((conversation, event))
        if isinstance(event, ApprovalRequested):
            return {"message": f"notice-{event.notice.approval_id}"}
        return None

    def of(self, kind: type[E]) -> list[E]:
        return [e for _, e in self.events if isinstance(e, kind)]


def default_registry(sandbox: Sandbox | None = None) -> ToolRegistry:
    """The file and shell tools; `sandbox`: the bash tool's (default: probed once, as
    `CLAWGATE_SANDBOX=auto`)."""
    bash = BashTool(timeout=40, sandbox=sandbox)
    return ToolRegistry([ReadTool(), WriteTool(), EditTool(), bash])


def make_policies(
    redis: aioredis.Redis,
    tools: Iterable[str] = TOOLS,
    *,
    document: PolicyDocument | None = None,
    admins: Iterable[str] = (ADMIN.key,),
    approvers: Iterable[str] = (),
    conversation_approvers: dict[str, list[str]] | None = None,
    requester_may_approve: bool = False,
    timeout_s: float = 3600,
) -> PolicyService:
    """A policy service as `bot.wiring` builds it; the keyword arguments are shorthands for
    the file's rules (`document`) and the settings' defaults."""
    document = document or PolicyDocument()
    document.approvals.requester_may_approve = requester_may_approve or None
    for conversation, people in (conversation_approvers or {}).items():
        rules = document.conversations.setdefault(conversation, ScopeRules())
        rules.approvals.approvers = people
    tools = tuple(tools)
    defaults = Defaults(
        enabled=tools,
        admins=frozenset(admins),
        approvers=frozenset(approvers),
        approval_timeout=timeout_s,
    )
    keys = Keys(PREFIX)
    return PolicyService(redis, keys, defaults, tools, document, AuditLog(redis, keys))


def make_runtime(
    redis: aioredis.Redis,
    workdir: Path,
    provider: Provider,
    *,
    max_steps: int = 6,
    registry: ToolRegistry | None = None,
    document: PolicyDocument | None = None,
    admins: Iterable[str] = (ADMIN.key,),
    approvers: Iterable[str] = (),
    conversation_approvers: dict[str, list[str]] | None = None,
    requester_may_approve: bool = False,
    timeout_s: float = 3600,
    liveness_ttl: float = 30,
    sandbox: Sandbox | None = None,
    middlewares: Sequence[Middleware] | None = None,
    tracer: Tracer | None = None,
    audit: AuditLog | None = None,
    models: ProviderFactory | None = None,
    loop: LoopOptions | None = None,
) -> tuple[Runtime, RecordingChannel]:
    """`middlewares`: the chain (default: the production one, `default_chain`); `models`: the
    providers of the document's `[[models]]`; `loop`: repeats, parallel calls, receipts' keys."""
    channel = RecordingChannel()
    keys = Keys(PREFIX)
    approvals = ApprovalStore(redis, keys, timeout_s=timeout_s)
    config = RuntimeConfig(
        workdir=workdir, max_steps=max_steps, liveness_ttl=liveness_ttl, loop=loop or LoopOptions()
    )
    tools = TOOLS if registry is None else [t.name for t in registry.active()]
    policies = make_policies(
        redis,
        tools,
        document=document,
        admins=admins,
        approvers=approvers,
        conversation_approvers=conversation_approvers,
        requester_may_approve=requester_may_approve,
        timeout_s=timeout_s,
    )
    runtime = Runtime(
        config,
        provider,
        registry or default_registry(sandbox),
        HistoryStore(redis, keys),
        channel,
        approvals,
        policies,
        middlewares=middlewares,
        tracer=tracer,
        audit=audit,
        models=models,
    )
    return runtime, channel


def working_sandbox(
    network: NetworkAccess = NetworkAccess.APPROVED, unix_sockets: UnixSockets = UnixSockets.NEVER
) -> Sandbox:
    """bwrap as production probes it; a machine without it fails the test under CI."""
    try:
        return probe(SandboxMode.BWRAP, network, unix_sockets)
    except SandboxUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{exc} (under CI a missing sandbox is a failure, not a skip)")
        pytest.skip(str(exc))
