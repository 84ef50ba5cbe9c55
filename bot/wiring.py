"""The composition root: settings in, a ready `Runtime` out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis

from bot.policy_file import PolicyFile
from bot.settings import Settings, SettingsError
from runtime.agent import Runtime, RuntimeConfig
from runtime.approval.authz import ApproverPolicy
from runtime.approval.middleware import HumanApprovalMiddleware
from runtime.approval.risk import RiskPolicy
from runtime.approval.store import ApprovalStore
from runtime.channel import Channel
from runtime.providers.base import Provider
from runtime.providers.demo import DemoProvider
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tool_policy import ToolPolicyMiddleware
from runtime.tools.base import Tool
from runtime.tools.bash import BashTool
from runtime.tools.files import EditTool, ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry


def build_provider(settings: Settings) -> Provider:
    if settings.uses_demo_model:
        return DemoProvider()
    # openai takes about a second to import: the offline demo path never pays for it.
    from runtime.providers.openai_provider import OpenAIProvider  # noqa: PLC0415

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAIProvider(
        settings.model,
        api_key=key,
        base_url=settings.openai_base_url,
        timeout=settings.model_timeout,
    )


def all_tools(settings: Settings) -> list[Tool[Any]]:
    return [
        ReadTool(),
        WriteTool(),
        EditTool(),
        BashTool(timeout=settings.bash_timeout, output_limit=settings.bash_output_limit),
    ]


def build_registry(
    settings: Settings, policy: PolicyFile, approvals: ApprovalStore
) -> ToolRegistry:
    registry = ToolRegistry(
        all_tools(settings), enabled=settings.enabled_tools, excluded=policy.tools.deny
    )
    unknown = registry.unknown_enabled()
    if unknown:
        raise SettingsError(f"CLAWGATE_ENABLED_TOOLS: unknown tools {', '.join(unknown)}")
    # Order matters: an admin's deny never reaches a human; only then the risk policy asks.
    registry.use(ToolPolicyMiddleware(allow=policy.tools.allow, deny=policy.tools.deny))
    registry.use(HumanApprovalMiddleware(RiskPolicy(policy.risk), approvals))
    return registry


def build_approvers(
    settings: Settings, policy: PolicyFile, extra_admins: Iterable[str] = ()
) -> ApproverPolicy:
    return ApproverPolicy.of(
        admins=[*settings.admins, *extra_admins],
        approvers=settings.approvers,
        conversation_approvers={
            conversation: entry.approvers
            for conversation, entry in policy.approvals.conversations.items()
        },
        requester_may_approve=policy.approvals.requester_may_approve,
    )


def build_runtime(
    settings: Settings,
    policy: PolicyFile,
    redis: Redis,
    channel: Channel,
    extra_admins: Iterable[str] = (),
) -> Runtime:
    config = RuntimeConfig(
        workdir=settings.workdir,
        max_steps=settings.max_steps,
        max_tool_result_chars=settings.max_tool_result_chars,
        liveness_ttl=settings.liveness_ttl,
    )
    keys = Keys(settings.redis_prefix)
    approvals = ApprovalStore(redis, keys, timeout_s=settings.approval_timeout)
    return Runtime(
        config,
        build_provider(settings),
        build_registry(settings, policy, approvals),
        HistoryStore(redis, keys),
        channel,
        approvals,
        build_approvers(settings, policy, extra_admins),
    )
