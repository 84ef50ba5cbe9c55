"""`clawgate doctor`: is this machine ready to run clawgate? One line per check, ✓ or ✗, and
for each ✗ the fix. Exit 0 only when every check passes. `clawgate serve` prints the checks
that do not repeat its own start (bot/server.py)."""

from __future__ import annotations

import asyncio
import importlib
import io
import os
import re
import socket
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TextIO, cast

from aiohttp import ClientSession
from redis.asyncio.cluster import RedisCluster

from bot.policy_file import PolicyFileError
from bot.settings import Settings, SettingsError, load_settings
from bot.settings_file import FIX, agent_may_write
from bot.wiring import load_policy
from runtime.hooks.answer import HookFailure
from runtime.hooks.probe import reachable
from runtime.mcp.supervisor import McpServers
from runtime.policy.listed_models import ListedModel
from runtime.policy.model import HookConfig, PolicyDocument
from runtime.redact import shown_url
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.durability import EVERYSEC, UNKNOWN, durability_warnings
from runtime.tools.sandbox import SandboxMode, SandboxUnavailable, probe

TIMEOUT = 5.0  # seconds a service gets to answer
# What a person's id looks like where clawgate can check it: a name instead of an id is the
# usual mistake (the id is what Slack and Feishu sign their requests with).
PERSON_IDS = {"slack": r"slack:[UW][A-Z0-9]{2,}", "feishu": r"feishu:ou_[0-9a-zA-Z]+"}


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{'✓' if self.ok else '✗'} {self.name}: {self.detail}"
        return text + (f"\n    fix: {self.fix}" if self.fix and not self.ok else "")


_UNREACHABLE: tuple[type[Exception], ...] = (*REDIS_FAILURES, OSError, TimeoutError)


async def _redis(settings: Settings) -> list[Check]:
    if not settings.redis_url:
        detail = "embedded (one process, nothing kept): fine for `clawgate chat`"
        return [Check("store", True, detail + "; set REDIS_URL to serve")]
    shown = shown_url(settings.redis_url)
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    try:
        async with asyncio.timeout(TIMEOUT):
            info = await redis.info("server")
        version = info.get("redis_version", "?")
        if settings.redis_cluster:  # the client found the masters through that one node
            masters = len(cast(RedisCluster, redis).get_primaries())
            version += f", a cluster of {masters} master{'s' if masters != 1 else ''}"
        reach = Check("redis", True, f"{shown} answers (Redis {version})")
        warnings = await durability_warnings(redis)
    except _UNREACHABLE as exc:
        fix = "start Redis there, or correct REDIS_URL (redis://host:6379/0)"
        return [Check("redis", False, f"cannot reach {shown} ({exc or 'timed out'})", fix)]
    finally:
        await redis.aclose()
    if not warnings:
        return [reach, Check("redis durability", True, "every write synced (appendfsync always)")]
    warning = warnings[0]
    if warning in (EVERYSEC, UNKNOWN):  # as durable as it gets without slowing every write
        return [reach, Check("redis durability", True, warning)]
    fix = "redis-cli CONFIG SET appendonly yes, and `appendonly yes` in redis.conf"
    return [reach, Check("redis durability", False, warning, fix)]


async def model_check(settings: Settings) -> Check:
    """Whether the default model answers (also for the console's Health page)."""
    if settings.uses_demo_model:
        detail = "the offline demo model (set OPENAI_API_KEY, or OPENAI_BASE_URL, for a real one)"
        return Check("model", True, detail)
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "none"
    fixes = ("check OPENAI_API_KEY", "check OPENAI_BASE_URL", "set CLAWGATE_MODEL to one")
    return await _probe("model", key, settings.openai_base_url, settings.model, fixes)


async def _listed_model(model: ListedModel) -> Check:
    """A model of the policy file's `[[models]]`, probed as the default one is."""
    name = f"model {model.name}"
    key = os.environ.get(model.api_key_env)
    if not key:
        detail = f"{model.api_key_env}, which holds its API key, is not set"
        return Check(name, False, detail, f"set {model.api_key_env} in clawgate's environment")
    fixes = (
        f"check {model.api_key_env}",
        f"check base_url of [[models]] {model.name} in the policy file",
        f"set model of [[models]] {model.name} to one",
    )
    return await _probe(name, key, model.base_url, model.model, fixes)


async def _probe(
    name: str, key: str, base_url: str | None, model: str, fixes: tuple[str, str, str]
) -> Check:
    """Whether the server at `base_url` takes `key` and lists `model`; `fixes`: what to check
    for a refused key, an unreachable server, and (the start of) a model it does not serve."""
    # Only with a real model (its provider loads the SDK anyway): most of a second at start.
    import openai  # noqa: PLC0415

    where = base_url or "https://api.openai.com/v1"
    client = openai.AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0)
    try:
        async with asyncio.timeout(TIMEOUT):
            listed = [model.id async for model in client.models.list()]
    except openai.AuthenticationError:
        return Check(name, False, f"{where} refused the API key", fixes[0])
    except (openai.APIError, TimeoutError) as exc:
        why = type(exc).__name__ if isinstance(exc, TimeoutError) else exc.message
        return Check(name, False, f"{where}/models did not answer ({why})", fixes[1])
    finally:
        await client.close()
    if model not in listed:
        some = ", ".join(sorted(listed)[:5]) or "none"
        fix = f"{fixes[2]} it serves ({some}{'…' if len(listed) > 5 else ''})"
        return Check(name, False, f"{where} does not list {model}", fix)
    return Check(name, True, f"{model} at {where}")


async def _slack(settings: Settings) -> Check | None:
    if not settings.slack_enabled or settings.slack_bot_token is None:
        return None
    from slack_sdk.errors import SlackApiError  # noqa: PLC0415 - only with Slack

    from adapters.slack.channel import web_client  # noqa: PLC0415

    token = settings.slack_bot_token.get_secret_value()
    async with ClientSession() as http:
        client = web_client(token, settings.slack_api_url, http)
        try:
            async with asyncio.timeout(TIMEOUT):
                auth = await client.auth_test()
        except SlackApiError as exc:
            error = exc.response.get("error", "unknown")
            return Check("slack", False, f"auth.test: {error}", "check SLACK_BOT_TOKEN (xoxb-…)")
        except (OSError, TimeoutError) as exc:
            where = settings.slack_api_url
            return Check("slack", False, f"cannot reach {where} ({exc})", "check SLACK_API_URL")
    mode = "Socket Mode" if settings.slack_app_token else "HTTP (Events API)"
    return Check("slack", True, f"bot {auth.get('user')} in team {auth.get('team')}, {mode}")


async def _feishu(settings: Settings) -> Check | None:
    if not settings.feishu_enabled or not settings.feishu_app_id:
        return None
    from adapters.feishu.channel import (  # noqa: PLC0415 - only with Feishu
        FeishuError,
        FeishuUnreachable,
        feishu_client,
        fetch_identity,
    )

    secret = settings.feishu_app_secret.get_secret_value() if settings.feishu_app_secret else ""
    client = feishu_client(settings.feishu_app_id, secret, settings.feishu_domain)
    try:
        identity = await asyncio.wait_for(asyncio.to_thread(fetch_identity, client), TIMEOUT)
    except (FeishuUnreachable, TimeoutError) as exc:
        where = settings.feishu_domain
        return Check("feishu", False, f"cannot reach {where} ({exc})", "check FEISHU_DOMAIN")
    except FeishuError as exc:
        fix = "check FEISHU_APP_ID and FEISHU_APP_SECRET (the app's credentials page)"
        return Check("feishu", False, f"the tenant token was refused ({exc})", fix)
    return Check("feishu", True, f"bot {identity.open_id}, {settings.feishu_mode}")


async def live_checks(settings: Settings, what: str) -> list[Check]:
    """The live checks of one part of the settings (`clawgate init` checks each answer as it
    is given): "redis", "model", "slack" or "feishu"."""
    if what == "redis":
        return await _redis(settings)
    if what == "model":
        return [await model_check(settings)]
    found = await (_slack(settings) if what == "slack" else _feishu(settings))
    return [found] if found else []


def _port(settings: Settings) -> Check:
    where = f"{settings.host}:{settings.port}"
    with socket.socket() as probe_socket:
        probe_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe_socket.bind((settings.host, settings.port))
        except OSError as exc:
            why = exc.strerror or str(exc)
            fix = "stop what listens there, or set CLAWGATE_PORT / CLAWGATE_HOST"
            return Check("port", False, f"cannot listen on {where} ({why})", fix)
    return Check("port", True, f"{where} is free for `clawgate serve`")


def policy_file_problem(settings: Settings) -> str | None:
    """Why the policy file cannot be trusted to serve a channel (None: it can): in the work
    dir an approved command may rewrite it (add an admin, a safe program, an `expose`)."""
    if settings.policy_file is None:
        return None
    why = agent_may_write(settings.policy_file, settings.workdir)
    if why is None:
        return None
    return (
        f"CLAWGATE_POLICY_FILE: {settings.policy_file}: {why}; `serve` and `worker` take the "
        "policy file only from outside the work dir: move it (e.g. to "
        "/etc/clawgate/clawgate.toml) and set CLAWGATE_POLICY_FILE to it"
    )


def _policy(settings: Settings) -> tuple[Check, PolicyDocument | None]:
    try:
        document = load_policy(settings)
    except PolicyFileError as exc:
        first, *more = str(exc).splitlines() or ["unreadable"]
        also = "".join(f"\n    {line}" for line in more)  # every problem, one a line
        return Check("policy", False, first + also, "correct the file (docs/policy.md)"), None
    if settings.policy_file is None:
        return Check("policy", True, "no policy file: the built-in defaults"), document
    problem = policy_file_problem(settings)
    if problem:
        detail, _, fix = problem.removeprefix("CLAWGATE_POLICY_FILE: ").partition("; ")
        return Check("policy", False, detail, fix), document
    scopes = len(document.conversations)
    return Check("policy", True, f"{settings.policy_file} ({scopes} conversation scopes)"), document


def _sandbox(settings: Settings) -> Check:
    try:
        sandbox = probe(settings.sandbox, settings.sandbox_network)
    except SandboxUnavailable as exc:
        return Check("sandbox", False, str(exc), "apt-get install bubblewrap")
    if sandbox.mode is SandboxMode.AUTO and not sandbox.contained:
        fix = "apt-get install bubblewrap (or CLAWGATE_SANDBOX=off to run commands uncontained)"
        return Check("sandbox", False, sandbox.describe(), fix)
    return Check("sandbox", True, sandbox.describe())


async def _mcp(settings: Settings, document: PolicyDocument | None) -> list[Check]:
    """Each MCP server of the policy file, started (or reached) and its tools listed, as
    `serve` would; then stopped again."""
    if document is None or not document.mcp_servers():
        return []
    try:
        sandbox = probe(settings.sandbox, settings.sandbox_network)
    except SandboxUnavailable:
        return []  # the sandbox check says why
    servers = McpServers(document, sandbox, settings.workdir)
    try:
        await servers.settled()
        states = servers.states()
    finally:
        await servers.aclose()
    fix = "see docs/mcp.md (the command or URL, its env, `clawgate serve` logs)"
    return [
        Check(
            f"mcp {s.name}",
            s.state == "up" and not s.warning,
            f"{s.transport}, {s.state}: {s.detail}" + (f"; but {s.warning}" if s.warning else ""),
            fix,
        )
        for s in states
    ]


async def _hooks(document: PolicyDocument | None) -> list[Check]:
    """Each enabled admin hook of the policy file: its command found, or its URL reachable; it
    is not asked (that could count as a real call). A disabled one is never asked: not
    probed either (the example file's are)."""
    scopes = document.scopes() if document else []
    hooks = [hook for rules in scopes for hook in rules.hooks.items() if hook[1].enabled]

    async def one(name: str, hook: HookConfig) -> Check:
        try:
            async with asyncio.timeout(TIMEOUT):
                return Check(f"hook {name}", True, await reachable(hook))
        except (HookFailure, TimeoutError) as exc:
            fix = "correct its command or url (docs/policy.md, Hooks); until then it asks"
            return Check(f"hook {name}", False, str(exc) or "timed out", fix)

    return list(await asyncio.gather(*(one(name, hook) for name, hook in hooks)))


def _people(settings: Settings, document: PolicyDocument | None) -> list[Check]:
    scopes = [document, *document.conversations.values()] if document else []
    admins = {*settings.admins, *(a for s in scopes for a in s.approvals.admins)}
    approvers = {*settings.approvers, *(a for s in scopes for a in s.approvals.approvers)}
    checks = []
    if admins:
        detail = f"{len(admins)} admins, {len(approvers)} approvers"
        checks.append(Check("people", True, detail))
    else:
        fix = "CLAWGATE_ADMINS=slack:U0123ABCD (a member id: docs/slack.md) or feishu:ou_…"
        detail = (
            "no admins: in Slack and Feishu nobody may change the policy, nor approve where no "
            "approvers are set (`clawgate chat` makes its user an admin)"
        )
        checks.append(Check("people", False, detail, fix))
    odd = sorted(
        person
        for person in admins | approvers
        if person.split(":", 1)[0] in PERSON_IDS
        and not re.fullmatch(PERSON_IDS[person.split(":", 1)[0]], person)
    )
    if odd:
        fix = "use ids: a Slack member id (U…), a Feishu open_id (ou_…); docs/slack.md, feishu.md"
        checks.append(Check("people", False, f"not ids: {', '.join(odd)}", fix))
    return checks


# The settings that decide what may run unasked and who may decide: said with their source,
# so a value from a file nobody meant is seen.
SECURITY_SETTINGS = (
    "CLAWGATE_SANDBOX",
    "CLAWGATE_SANDBOX_NETWORK",
    "CLAWGATE_ADMINS",
    "CLAWGATE_APPROVERS",
    "CLAWGATE_WORKDIR",
    "CLAWGATE_POLICY_FILE",
    "CLAWGATE_ENABLED_TOOLS",
    "CLAWGATE_ENV_FILE",
)


def _audit_key(settings: Settings) -> list[Check]:
    """Serving with Redis, the audit chain (runtime/audit_chain.py) should be keyed: unkeyed,
    whoever can write Redis can rebuild it after changing an entry."""
    if not settings.redis_url:
        return []
    ring = settings.evidence_keys()
    if not ring.keyed:
        detail = "none set: the audit chain catches accidents, not someone who can write Redis"
        fix = "set CLAWGATE_AUDIT_KEY=k1:<32 random characters> or CLAWGATE_AUDIT_KEY_FILE"
        return [Check("audit key", False, detail, fix)]
    count = len(ring.keys)
    detail = (
        f"{ring.current} seals new entries ({count} key{'s' if count != 1 else ''} in the ring)"
    )
    return [Check("audit key", True, detail)]


def _settings(settings: Settings, serving: bool) -> list[Check]:
    """Where every setting came from: the environment, the settings file, or its default."""
    by_source: dict[str, list[str]] = {}
    for name in Settings.variables():
        if name not in SECURITY_SETTINGS:
            by_source.setdefault(settings.source(name), []).append(name)
    parts = [
        f"from {'the ' if where == 'environment' else ''}{where}: {', '.join(names)}"
        for where, names in sorted(by_source.items())
        if where != "default"
    ]
    rest = "the others their defaults" if parts else "all their defaults"
    found = [Check("settings", True, "; ".join([*parts, rest]))]
    shown = {
        "CLAWGATE_SANDBOX": settings.sandbox.value,
        "CLAWGATE_SANDBOX_NETWORK": settings.sandbox_network.value,
        "CLAWGATE_ADMINS": ",".join(settings.admins) or "none",
        "CLAWGATE_APPROVERS": ",".join(settings.approvers) or "none",
        "CLAWGATE_WORKDIR": str(settings.workdir),
        "CLAWGATE_POLICY_FILE": str(settings.policy_file or "none"),
        "CLAWGATE_ENABLED_TOOLS": ",".join(settings.enabled_tools),
        "CLAWGATE_ENV_FILE": str(settings.settings_file.path or "none read"),
    }
    security = ", ".join(f"{name}={shown[name]} ({settings.source(name)})" for name in shown)
    found.append(Check("security settings", True, security))
    found += [
        Check("setting name", False, line, "docs/configuration.md names every setting")
        for line in settings.unknown
    ]
    ignored = settings.settings_file.ignored
    if ignored and not serving:  # `serve` said so as it read its settings
        found.append(Check("settings file", False, ignored, FIX))
    return found


# Where `serve`'s worker runs, by CLAWGATE_WORKER_MODE.
WORKER_PLACES = {
    "child": "`serve` runs its worker in a child process it supervises (acks never wait for it)",
    "inprocess": "`serve` runs its worker in its own event loop (acks wait behind it under load)",
    "none": "`serve` only takes inputs: `clawgate worker` processes do the work",
}


def _worker_topology(settings: Settings) -> Check:
    mode = settings.worker_topology
    source = (
        "the deprecated CLAWGATE_INPROCESS_WORKER"
        if settings.inprocess_worker is not None
        and settings.source("CLAWGATE_WORKER_MODE") == "default"
        else settings.source("CLAWGATE_WORKER_MODE")
    )
    detail = f"CLAWGATE_WORKER_MODE={mode} ({source}): {WORKER_PLACES[mode]}"
    if mode == "child":
        port = settings.metrics_port
        detail += (
            f"; its /metrics on port {port}"
            if port
            else ("; its metrics are not served (set CLAWGATE_METRICS_PORT)")
        )
    return Check("worker", True, detail)


async def print_serving_checks(settings: Settings, out: TextIO) -> None:
    """What `clawgate doctor` would say, as `serve` and `worker` start."""
    for check in await checks(settings, serving=True):
        for line in check.line().splitlines():
            out.write(f"clawgate: {line}\n")
    out.flush()


async def checks(settings: Settings, serving: bool = False) -> list[Check]:
    """Every check; `serving`: only those `serve` does not do itself as it starts."""
    policy, document = _policy(settings)
    found = [*_settings(settings, serving), policy, _sandbox(settings), *_audit_key(settings)]
    found += _people(settings, document)
    services: list[Awaitable[Check | list[Check] | None]] = [_redis(settings)]
    services.append(model_check(settings))
    services += [_listed_model(model) for model in (document.offered_models if document else [])]
    if not serving:
        # The platform SDKs load in seconds, which would stall the event loop while the other
        # checks' timeouts run: load them first.
        for enabled, module in (
            (settings.slack_enabled, "adapters.slack.channel"),
            (settings.feishu_enabled, "adapters.feishu.channel"),
        ):
            if enabled:
                importlib.import_module(module)
        services += [_slack(settings), _feishu(settings), _mcp(settings, document)]
        services.append(_hooks(document))
    for result in await asyncio.gather(*services):
        found += result if isinstance(result, list) else [result] if result else []
    if not serving:  # `serve` says where its worker runs as it starts
        found += [_worker_topology(settings), _port(settings)]
    return found


def run_doctor(out: TextIO) -> int:
    try:
        settings = load_settings(io.StringIO())  # an ignored file is one of the checks
    except SettingsError as exc:
        for problem in str(exc).splitlines():
            out.write(Check("settings", False, problem, "docs/configuration.md").line() + "\n")
        return 1
    found = asyncio.run(checks(settings))
    for check in found:
        out.write(check.line() + "\n")
    failed = sum(not check.ok for check in found)
    out.write(
        f"{len(found)} checks passed.\n" if not failed else f"{failed} of {len(found)} failed.\n"
    )
    return 0 if not failed else 1
