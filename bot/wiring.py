"""The composition root: settings in, a ready `Runtime` out."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from bot.policy_file import PolicyFile
from bot.settings import Settings, SettingsError
from runtime.agent import Runtime, RuntimeConfig
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


def build_registry(settings: Settings, policy: PolicyFile) -> ToolRegistry:
    registry = ToolRegistry(
        all_tools(settings), enabled=settings.enabled_tools, excluded=policy.tools.deny
    )
    unknown = registry.unknown_enabled()
    if unknown:
        raise SettingsError(f"CLAWGATE_ENABLED_TOOLS: unknown tools {', '.join(unknown)}")
    registry.use(ToolPolicyMiddleware(allow=policy.tools.allow, deny=policy.tools.deny))
    return registry


def build_runtime(
    settings: Settings, policy: PolicyFile, redis: Redis, channel: Channel
) -> Runtime:
    config = RuntimeConfig(
        workdir=settings.workdir,
        max_steps=settings.max_steps,
        max_tool_result_chars=settings.max_tool_result_chars,
    )
    history = HistoryStore(redis, Keys(settings.redis_prefix))
    return Runtime(
        config, build_provider(settings), build_registry(settings, policy), history, channel
    )
