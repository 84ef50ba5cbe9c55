"""What the `clawgate` commands do, once their arguments are parsed (bot.cli_parser)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import signal
import sys
from collections.abc import AsyncIterator

from aiohttp import ClientSession
from redis.asyncio import Redis

from adapters.console.channel import ConsoleChannel
from adapters.console.chat import ConsoleChat
from adapters.console.relay import ConsoleRelay, tail
from adapters.console.terminal import start_line
from adapters.router import Router
from bot.cli_approvals import REFUSED, run_approvals_command, through_workers
from bot.cli_audit import run_audit_command
from bot.cli_console import run_console_command
from bot.cli_parser import build_parser
from bot.cli_policy import run_policy_command
from bot.cli_stats import run_stats_command
from bot.cli_trace import run_trace_command
from bot.errors import Unavailable
from bot.logs import configure_logging
from bot.policy_file import PolicyFileError
from bot.policy_reload import keep_policy_fresh
from bot.settings import Settings, SettingsError, load_settings
from bot.wiring import approval_store, build_mcp, build_runtime, build_sandbox, load_policy
from runtime.approval.models import ApprovalRecord
from runtime.approval.wing import ApprovalView
from runtime.audit import AuditLog
from runtime.models import Actor
from runtime.outage import OUTAGE
from runtime.queue.inbound import DecisionRequest
from runtime.queue.inbox import Inbox
from runtime.queue.ingest import Ingest
from runtime.queue.remote import Replies
from runtime.redact import shown, shown_url
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys

SWEEP_INTERVAL = 5.0
CONSOLE = "console"  # the platform of `clawgate chat` conversations


@contextlib.asynccontextmanager
async def _redis(settings: Settings) -> AsyncIterator[Redis]:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    try:
        yield redis
    finally:
        await redis.aclose()


async def _chat(settings: Settings, session: str) -> int:
    policy = load_policy(settings)
    actor = Actor(platform=CONSOLE, user_id=getpass.getuser())
    async with _redis(settings) as redis:
        if settings.redis_url:  # a shared store that is down: say so now, not per message
            await redis.ping()
        OUTAGE.watch(redis)  # one that goes away later is said once, and once it is back
        channel = ConsoleChannel(sys.stdout)
        sandbox = build_sandbox(settings)
        mcp = build_mcp(settings, policy, sandbox)
        runtime = build_runtime(
            settings, policy, redis, channel, [actor.key], sandbox=sandbox, mcp=mcp
        )
        about = start_line(
            settings.model, settings.openai_base_url, settings.redis_url, settings.uses_demo_model
        )
        chat = ConsoleChat(
            runtime,
            f"console:{session}",
            actor,
            sys.stdin,
            sys.stdout,
            channel,
            about,
            embedded=settings.redis_url is None,
        )
        keys = Keys(settings.redis_prefix)
        background = [
            asyncio.create_task(chat.sweep_forever(SWEEP_INTERVAL)),
            asyncio.create_task(tail(redis, keys, chat.session, chat.show_relayed)),
            asyncio.create_task(keep_policy_fresh(runtime.policies, settings.policy_file)),
        ]
        try:
            return await chat.serve()
        finally:
            for task in background:
                task.cancel()
            await mcp.aclose()
            await runtime.loop.aclose()  # the models' connections


async def _approvals(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.redis_url:
        raise SettingsError("REDIS_URL: required for `clawgate approvals` (approvals live there)")
    async with _redis(settings) as redis:
        keys = Keys(settings.redis_prefix)
        store = approval_store(settings, redis)

        async def deliver(record: ApprovalRecord, actor: Actor, request: DecisionRequest) -> int:
            if record.conversation.platform == CONSOLE:
                return await _decide_here(settings, redis, record, actor, request)
            inbox = Inbox(redis, keys, settings.dedupe_ttl, partitions=settings.partitions)
            ingest, replies = Ingest(inbox, store), Replies(redis, keys)
            wait, timeout = args.wait, args.timeout
            return await through_workers(
                ingest, replies, record, actor, request, wait, timeout, sys.stdout
            )

        view = ApprovalView(
            store, AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
        )
        return await run_approvals_command(view, args, sys.stdout, deliver)


async def _decide_here(
    settings: Settings,
    redis: Redis,
    record: ApprovalRecord,
    actor: Actor,
    request: DecisionRequest,
) -> int:
    """A `clawgate chat` conversation has no worker (its terminal is its only home): its
    decision runs in this process, in this shell's work dir, and shows in the chat."""
    policy = load_policy(settings)
    async with ClientSession() as http:
        channels = _decision_channels(settings, redis, http)
        sandbox = build_sandbox(settings)
        mcp = build_mcp(settings, policy, sandbox)  # an approved MCP call runs here
        runtime = build_runtime(settings, policy, redis, channels, sandbox=sandbox, mcp=mcp)
        try:
            decision = await runtime.decide(
                record.id, request.approve, actor, None, request.reason, request.grant()
            )
        finally:
            await mcp.aclose()
            await runtime.loop.aclose()  # the models' connections
    if not decision.accepted:
        print(f"clawgate: {shown(decision.message)}", file=sys.stderr)
        return REFUSED
    print(shown(decision.message))  # a grant's rule may quote the call
    return 0


def _decision_channels(settings: Settings, redis: Redis, http: ClientSession) -> Router:
    """Where a decision on a `clawgate chat` conversation made from the shell shows: the run
    and the notice in that chat's terminal and this one; copies of the notice in Slack or
    Feishu when configured here as for serve; anything else in this terminal."""
    router = Router(fallback=ConsoleChannel(sys.stdout))
    router.add(CONSOLE, ConsoleRelay(redis, Keys(settings.redis_prefix), sys.stdout))
    if settings.slack_enabled and settings.slack_bot_token is not None:
        from adapters.slack.channel import SlackChannel, web_client  # noqa: PLC0415

        token = settings.slack_bot_token.get_secret_value()
        client = web_client(token, settings.slack_api_url, http)
        router.add("slack", SlackChannel(client, settings.answer_file_chars))
    if settings.feishu_enabled and settings.feishu_app_id and settings.feishu_app_secret:
        from adapters.feishu.channel import FeishuChannel, feishu_client  # noqa: PLC0415

        secret = settings.feishu_app_secret.get_secret_value()
        client = feishu_client(settings.feishu_app_id, secret, settings.feishu_domain)
        channel = FeishuChannel(
            client,
            settings.feishu_app_id,
            settings.answer_file_chars,
            settings.feishu_streaming_cards,
        )
        router.add("feishu", channel)
    return router


async def _serve(settings: Settings, http: bool) -> int:
    if not http and not settings.redis_url:
        raise SettingsError("REDIS_URL: required for `clawgate worker` (workers share a server)")
    from bot.server import run  # noqa: PLC0415 - the platform SDKs load only when serving

    return await run(settings, load_policy(settings), http)


def _bench(settings: Settings, args: argparse.Namespace) -> int:
    if args.target == "ingest":
        from bot.bench.ingest import run_ingest_bench  # noqa: PLC0415 - only the bench needs it

        turns = args.turns or 20
        return asyncio.run(
            run_ingest_bench(
                settings,
                args.rates,
                args.duration,
                args.threads,
                turns,
                split=args.split,
                platform=args.platform,
                workers=args.workers,
                backlog=args.backlog,
                as_json=getattr(args, "json", False),
                model_server=args.model_server,
                floor=args.floor,
                compare_floor=args.compare_floor,
                rounds=args.rounds,
            )
        )
    from bot.bench.runtime import run_bench  # noqa: PLC0415 - only the bench needs it

    return asyncio.run(
        run_bench(
            settings,
            args.target,
            args.calls,
            args.turns or 500,
            args.bash_calls,
            history=args.history,
            as_json=args.json,
            model_server=args.model_server,
            peers=args.peers,
        )
    )


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; returns the exit code (the error policy: bot/errors.py)."""
    if args.command in ("chat", "serve", "worker") and hasattr(signal, "SIGHUP"):
        # SIGHUP reloads the policy once running; until then it must not end the process.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        return _run(args)
    except (SettingsError, PolicyFileError) as exc:
        return _fail(exc, 2)
    except Unavailable as exc:
        return _fail(exc, 1)
    except REDIS_FAILURES as exc:  # what a command did not handle itself
        where = shown_url(os.environ.get("REDIS_URL") or "the embedded store")
        return _fail(f"cannot reach Redis at {where} ({exc})", 1)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        return _fail(f"{type(exc).__name__}: {exc} (clawgate --debug … shows the traceback)", 1)


def _run(args: argparse.Namespace) -> int:
    unset = _without_settings(args)
    if unset is not None:
        return unset
    _flags_win(args)
    settings = load_settings(platforms=args.command != "chat")
    configure_logging(settings.log_level, settings.log_format, sys.stderr)
    if args.command == "chat":
        return asyncio.run(_chat(settings, args.session))
    if args.command == "selftest":
        from bot.selftest import run_selftest  # noqa: PLC0415

        return run_selftest(settings)
    if args.command == "audit":
        return run_audit_command(settings, args)
    if args.command == "policy":
        return run_policy_command(settings, args)
    if args.command == "trace":
        return run_trace_command(settings, args)
    if args.command == "console":
        return run_console_command(settings, args)
    if args.command == "approvals" and args.verb == "stats":  # the audit trail only
        return run_stats_command(settings, args)
    if args.command == "approvals":
        return asyncio.run(_approvals(settings, args))
    if args.command in ("serve", "worker"):
        return asyncio.run(_serve(settings, http=args.command == "serve"))
    return _bench(settings, args)


def _without_settings(args: argparse.Namespace) -> int | None:
    """The commands that read no settings (doctor reads them itself, init makes them, the
    others help set up); None for the rest."""
    if args.command == "doctor":  # a bad setting is a failed check there
        from bot.doctor import run_doctor  # noqa: PLC0415

        return run_doctor(sys.stdout)
    if args.command == "completion":
        return _completion(args.shell)
    if args.command == "init":
        from bot.init_setup import run_init  # noqa: PLC0415

        return run_init(args)
    if args.command == "slack":  # loads no SDK
        from bot.slack_manifest import print_manifest  # noqa: PLC0415

        return print_manifest(args.url, args.socket_mode, sys.stdout, sys.stderr)
    if args.command == "feishu":
        from bot.feishu_checklist import print_checklist  # noqa: PLC0415

        return print_checklist(args.url, sys.stdout, sys.stderr)
    return None


def _completion(shell: str) -> int:
    if shell == "fish":  # shtab makes the others, not fish's
        from bot.completion_fish import fish_script  # noqa: PLC0415

        sys.stdout.write(fish_script(build_parser()))
        return 0
    import shtab  # noqa: PLC0415

    print(shtab.complete(build_parser(), shell=shell))
    return 0


# `serve`/`worker` flags → the settings they stand for.
FLAG_SETTINGS = {"host": "CLAWGATE_HOST", "port": "CLAWGATE_PORT", "workdir": "CLAWGATE_WORKDIR"}


def _flags_win(args: argparse.Namespace) -> None:
    """`serve --host/--port/--workdir`: a flag wins over the environment and the settings
    file. Set in this process's environment, so that serve's worker child has it too."""
    for flag, name in FLAG_SETTINGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            os.environ[name] = str(value)


def _fail(problem: object, code: int) -> int:
    """The error policy of every command (bot/errors.py): one line per problem, no traceback."""
    for line in str(problem).splitlines():
        print(f"clawgate: {line}", file=sys.stderr)
    return code
