"""The composition root: settings in, a ready `Runtime` out."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from redis.asyncio import Redis

from bot.policy_file import load_policy_file
from bot.settings import Settings, SettingsError
from runtime.agent import Release, Runtime
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import Channel
from runtime.explorer import Explorer
from runtime.loop import LoopOptions
from runtime.mcp.supervisor import McpServers
from runtime.policy.listed_models import ListedModel
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyService
from runtime.providers.base import Provider, ProviderError, ProviderFactory
from runtime.providers.demo import DemoProvider
from runtime.queue.steering import Steering
from runtime.repeats import RepeatRule
from runtime.runtime_config import RuntimeConfig
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tools.base import Tool
from runtime.tools.bash import BashTool
from runtime.tools.clarify import ClarifyTool
from runtime.tools.explore import ExploreTool
from runtime.tools.files import EditTool, ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Sandbox, SandboxUnavailable, probe
from runtime.tools.send_file import SendFileTool
from runtime.tracing.recorder import Tracer, TraceSink
from runtime.tracing.store import TraceStore

log = logging.getLogger(__name__)


def build_provider(settings: Settings) -> Provider:
    if settings.uses_demo_model:
        return DemoProvider()
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    images = settings.model_images
    return _openai(settings, settings.model, key, settings.openai_base_url, images)


def _openai(
    settings: Settings, model: str, key: str | None, base_url: str | None, images: bool
) -> Provider:
    # openai takes about a second to import: the offline demo path never pays for it.
    from runtime.providers.openai_provider import OpenAIProvider  # noqa: PLC0415

    return OpenAIProvider(
        model,
        api_key=key,
        base_url=base_url,
        timeout=settings.model_timeout,
        stream=settings.stream,
        images=settings.workdir if images else None,
    )


def listed_models(settings: Settings) -> ProviderFactory:
    """Makes the provider of a policy file's `[[models]]` entry (a conversation switched to
    it): its key is read from the environment variable the entry names, when first used."""

    def make(model: ListedModel) -> Provider:
        key = os.environ.get(model.api_key_env)
        if not key:
            raise ProviderError(
                f"the model {model.name} has no API key: the environment variable "
                f"{model.api_key_env} is not set in this process"
            )
        return _openai(settings, model.model, key, model.base_url, model.images)

    return make


def build_sandbox(settings: Settings) -> Sandbox:
    """Probe the OS sandbox once; CLAWGATE_SANDBOX=bwrap without a working bwrap is a
    settings error (the operator asked for containment), `auto` falls back to asking."""
    try:
        read = settings.settings_file.path
        return probe(
            settings.sandbox,
            settings.sandbox_network,
            settings.sandbox_unix_sockets,
            hidden=() if read is None else (str(read),),
        )
    except SandboxUnavailable as exc:
        raise SettingsError(str(exc)) from exc


def file_and_shell_tools(settings: Settings, sandbox: Sandbox) -> list[Tool[Any]]:
    return [
        ReadTool(),
        WriteTool(),
        EditTool(),
        BashTool(
            timeout=settings.bash_timeout,
            output_limit=settings.bash_output_limit,
            sandbox=sandbox,
        ),
    ]


# Every tool the process knows (enabled or not), in the order the model sees them.
TOOL_NAMES = (
    ReadTool.name,
    WriteTool.name,
    EditTool.name,
    BashTool.name,
    ExploreTool.name,
    SendFileTool.name,
    ClarifyTool.name,
)


def locked_paths(settings: Settings) -> tuple[str, ...]:
    """The policy file's path in the work directory, if it lies there: the agent's tools may
    never change it (it is what decides what they may do)."""
    if settings.policy_file is None:
        return ()
    try:
        inside = settings.policy_file.resolve().relative_to(settings.workdir)
    except ValueError:
        return ()
    return (inside.as_posix(),)


def load_policy(settings: Settings) -> PolicyDocument:
    """The policy file named by the settings, checked against the tools this process has."""
    return load_policy_file(settings.policy_file, TOOL_NAMES)


def build_mcp(settings: Settings, document: PolicyDocument, sandbox: Sandbox) -> McpServers:
    """The MCP servers of the policy file (started on the runtime's first use)."""
    return McpServers(document, sandbox, settings.workdir)


def build_policies(
    settings: Settings,
    document: PolicyDocument,
    redis: Redis,
    audit: AuditLog,
    extra_admins: Iterable[str] = (),
    mcp: McpServers | None = None,
) -> PolicyService:
    extra = list(extra_admins)
    admins_from = " + ".join(
        [*(["CLAWGATE_ADMINS"] if settings.admins else []), *(["the local user"] if extra else [])]
    )
    unknown = sorted(set(settings.enabled_tools) - set(TOOL_NAMES))
    if unknown:
        raise SettingsError(
            f"CLAWGATE_ENABLED_TOOLS: unknown tools {', '.join(unknown)} "
            f"(tools: {', '.join(TOOL_NAMES)})"
        )
    defaults = Defaults(
        enabled=tuple(settings.enabled_tools),
        admins=frozenset([*settings.admins, *extra]),
        admins_from=admins_from or "CLAWGATE_ADMINS",
        approvers=frozenset(settings.approvers),
        approval_timeout=settings.approval_timeout,
        locked_paths=locked_paths(settings),
    )
    keys = Keys(settings.redis_prefix)
    policies = PolicyService(redis, keys, defaults, TOOL_NAMES, document, audit, catalog=mcp)
    if mcp is not None:
        policies.watchers.append(mcp.update)  # a reloaded file starts and stops servers
    return policies


def approval_store(settings: Settings, redis: Redis) -> ApprovalStore:
    return ApprovalStore(
        redis,
        Keys(settings.redis_prefix),
        timeout_s=settings.approval_timeout,
        max_pending=settings.max_pending_per_user,
    )


OTEL_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
OTEL_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def otel_export_on(env: Mapping[str, str]) -> bool:
    """Whether runs are exported to OpenTelemetry: an OTLP endpoint is set and neither
    OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns the export off. A protocol
    other than http/protobuf is a settings error (only that exporter is installed)."""
    if not any(env.get(name, "").strip() for name in OTEL_ENDPOINTS):
        return False
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        endpoint = next(name for name in OTEL_ENDPOINTS if env.get(name, "").strip())
        raise SettingsError(
            f"{endpoint} is set but the OpenTelemetry SDK is not installed: "
            "pip install 'clawgate[otel]' (or unset it)"
        )
    for name in OTEL_PROTOCOLS:  # the first one set is the one the SDK would use
        if protocol := env.get(name, "").strip():
            if protocol != "http/protobuf":
                raise SettingsError(
                    f"{name}={protocol}: clawgate exports traces over OTLP/HTTP with protobuf "
                    "only; set it to http/protobuf (the collector's port 4318) or unset it"
                )
            break
    return True


def build_tracer(settings: Settings, redis: Redis, keys: Keys) -> Tracer:
    """Traces stored in Redis for `CLAWGATE_TRACE_TTL` unless CLAWGATE_TRACE_MODE=off, replay
    payloads cut at `CLAWGATE_TRACE_PAYLOAD_CHARS`; with an OTLP endpoint set, also exported to
    OpenTelemetry — then with tracing off, recorded as metadata for the export alone."""
    store: TraceSink | None = None
    if settings.trace_mode != "off":
        store = TraceStore(redis, keys, settings.trace_ttl)
    if not otel_export_on(os.environ):
        return Tracer(settings.trace_mode, store, payload_chars=settings.trace_payload_chars)
    # The SDK takes a while to import and starts a thread: only where export is on.
    from runtime.tracing.otel import exporting  # noqa: PLC0415

    mode = "metadata" if settings.trace_mode == "off" else settings.trace_mode
    return Tracer(mode, exporting(store), payload_chars=settings.trace_payload_chars)


def loop_options(settings: Settings) -> LoopOptions:
    """When a run stops repeating itself, how many read-only calls run at once, and the key
    ring of receipts (from the environment or a file, never from Redis)."""
    repeats = RepeatRule(settings.repeat_limit, frozenset(settings.polling_tools))
    return LoopOptions(repeats, settings.parallel_calls, settings.evidence_keys())


def build_runtime(
    settings: Settings,
    policy: PolicyDocument,
    redis: Redis,
    channel: Channel,
    extra_admins: Iterable[str] = (),
    sandbox: Sandbox | None = None,
    approvals: ApprovalStore | None = None,
    release: Release | None = None,
    mcp: McpServers | None = None,
    steering: Steering | None = None,
) -> Runtime:
    """`sandbox`: probed from the settings when not given; `approvals`: the store the
    process's ingest shares (made here when not given); `release`: how held messages run once
    a wait ends outside a run (see Runtime); `mcp`: the policy file's MCP servers (made here
    when not given; whoever made them closes them); `steering`: see Runtime."""
    config = RuntimeConfig(
        workdir=settings.workdir,
        max_steps=settings.max_steps,
        max_tool_result_chars=settings.max_tool_result_chars,
        max_message_chars=settings.max_message_chars,
        liveness_ttl=settings.liveness_ttl,
        context_budget=settings.context_budget,
        loop=loop_options(settings),
    )
    keys = Keys(settings.redis_prefix)
    approvals = approvals or approval_store(settings, redis)
    audit = AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
    sandbox = sandbox or build_sandbox(settings)
    mcp = mcp or build_mcp(settings, policy, sandbox)
    policies = build_policies(settings, policy, redis, audit, extra_admins, mcp)
    if policies.defaults.locked_paths:  # said where tools run, not by every operator command
        log.warning(
            "the policy file %s lies in CLAWGATE_WORKDIR: tool calls may not change it; keep "
            "it outside the work directory in production",
            settings.policy_file,
        )
    provider = build_provider(settings)
    history = HistoryStore(redis, keys)
    tools = file_and_shell_tools(settings, sandbox)
    explorer = Explorer(
        provider,
        tools,
        history,
        settings.max_tool_result_chars,
        policies,
        audit,
        step_limit=settings.max_steps,
        context_budget=settings.context_budget,
        options=config.loop,
    )
    # Not the explorer's: a child that only reads posts nothing.
    tools += [ExploreTool(explorer), SendFileTool(settings.send_file_max_bytes), ClarifyTool()]
    registry = ToolRegistry(tools, enabled=settings.enabled_tools)  # checked in build_policies
    registry.add_source(mcp)  # the MCP tools: the policy decides where they are active
    return Runtime(
        config,
        provider,
        registry,
        history,
        channel,
        approvals,
        policies,
        audit=audit,
        tracer=build_tracer(settings, redis, keys),
        release=release,
        steering=steering,
        models=listed_models(settings),
    )
