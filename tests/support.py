"""Test helpers: a channel that records what would be posted, and a runtime built the way
`bot.wiring` builds it, on a real Redis."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import redis.asyncio as aioredis

from runtime.agent import Runtime, RuntimeConfig
from runtime.approval.authz import ApproverPolicy
from runtime.approval.middleware import HumanApprovalMiddleware
from runtime.approval.risk import RiskPolicy
from runtime.approval.store import ApprovalStore
from runtime.channel import ApprovalRequested, Event
from runtime.models import Actor, ConversationRef
from runtime.providers.base import Provider
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tool_policy import ToolPolicyMiddleware
from runtime.tools.bash import BashTool
from runtime.tools.files import EditTool, ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry

E = TypeVar("E", bound=Event)
PREFIX = "cgtest"
ALICE = Actor(platform="console", user_id="alice")
ADMIN = Actor(platform="slack", user_id="UADMIN")
HERE = ConversationRef(platform="console", id="console:test")


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


def default_registry(
    approvals: ApprovalStore, deny: Iterable[str] = (), policy: RiskPolicy | None = None
) -> ToolRegistry:
    registry = ToolRegistry([ReadTool(), WriteTool(), EditTool(), BashTool(timeout=40)])
    registry.use(ToolPolicyMiddleware(deny=deny))
    registry.use(HumanApprovalMiddleware(policy or RiskPolicy(), approvals))
    return registry


def make_runtime(
    redis: aioredis.Redis,
    workdir: Path,
    provider: Provider,
    *,
    max_steps: int = 6,
    registry: ToolRegistry | None = None,
    admins: Iterable[str] = (ADMIN.key,),
    approvers: Iterable[str] = (),
    conversation_approvers: dict[str, list[str]] | None = None,
    requester_may_approve: bool = False,
    timeout_s: float = 3600,
    liveness_ttl: float = 30,
) -> tuple[Runtime, RecordingChannel]:
    channel = RecordingChannel()
    keys = Keys(PREFIX)
    approvals = ApprovalStore(redis, keys, timeout_s=timeout_s)
    config = RuntimeConfig(workdir=workdir, max_steps=max_steps, liveness_ttl=liveness_ttl)
    policy = ApproverPolicy.of(admins, approvers, conversation_approvers, requester_may_approve)
    runtime = Runtime(
        config,
        provider,
        registry or default_registry(approvals),
        HistoryStore(redis, keys),
        channel,
        approvals,
        policy,
    )
    return runtime, channel
