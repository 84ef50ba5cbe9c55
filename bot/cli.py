"""The `clawgate` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.console.channel import ConsoleChannel
from adapters.console.chat import ConsoleChat
from bot.cli_approvals import add_approvals_parser, run_approvals_command
from bot.cli_audit import add_audit_parser, run_audit_command
from bot.cli_policy import add_policy_parser, run_policy_command
from bot.cli_trace import add_trace_parser, run_trace_command
from bot.logs import configure_logging
from bot.policy_file import PolicyFileError
from bot.policy_reload import keep_policy_fresh
from bot.settings import Settings, SettingsError, load_settings
from bot.wiring import build_runtime, load_policy
from runtime.models import Actor
from runtime.store.connection import connect
from runtime.store.keys import check_session_id

SWEEP_INTERVAL = 5.0
_N = TypeVar("_N", int, float)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clawgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="chat with the assistant in this terminal")
    chat.add_argument(
        "--session",
        type=_session_name,
        default="local",
        help="session name (default: local; no spaces or braces, at most 192 characters)",
    )

    sub.add_parser("serve", help="serve the chat platforms over HTTP, with a worker in process")
    sub.add_parser("worker", help="an extra worker: takes queued work, no HTTP (needs REDIS_URL)")

    add_approvals_parser(sub)
    add_audit_parser(sub)
    add_policy_parser(sub)
    add_trace_parser(sub)

    bench = sub.add_parser("bench", help="measure performance")
    bench.add_argument("target", choices=["runtime", "approval", "ingest"], help="what to measure")
    bench.add_argument("--calls", type=int, default=20_000, help="tool calls to time (runtime)")
    bench.add_argument(
        "--turns",
        type=_positive(int),
        default=None,
        help="turns or round trips to time (default 500; ingest: per thread, default 20)",
    )
    bench.add_argument(
        "--bash-calls",
        type=_positive(int),
        default=200,
        help="runtime: bash calls to time, uncontained and in the sandbox (default 200)",
    )
    bench.add_argument(
        "--rates",
        type=_rates,
        default=[100, 250, 500, 750, 1000, 1500],
        help="ingest: requests per second to step through (default 100,250,500,750,1000,1500)",
    )
    bench.add_argument(
        "--duration",
        type=_positive(float),
        default=3.0,
        help="ingest: seconds per rate (default 3)",
    )
    bench.add_argument(
        "--split",
        action="store_true",
        help="ingest: serve without its worker (CLAWGATE_INPROCESS_WORKER=false) + one worker",
    )
    bench.add_argument(
        "--threads",
        type=_positive(int),
        default=50,
        help="ingest: concurrent Slack threads / Feishu chats for the end-to-end test (default 50)",
    )
    bench.add_argument(
        "--platform",
        choices=["slack", "feishu"],
        default="slack",
        help="ingest: whose signed events to send, to a fake of whose API (default slack)",
    )
    return parser


def _session_name(name: str) -> str:
    try:
        check_session_id(f"console:{name}")  # the terminal's session ids carry this prefix
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{name!r}: 1-192 characters, no spaces or braces"
        ) from None
    return name


def _positive(kind: Callable[[str], _N]) -> Callable[[str], _N]:
    def parse(text: str) -> _N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value

    return parse


def _rates(text: str) -> list[int]:
    parse = _positive(int)
    rates = [parse(item.strip()) for item in text.split(",") if item.strip()]
    if not rates:
        raise argparse.ArgumentTypeError("expected a comma-separated list of rates, like 100,500")
    return rates


@contextlib.asynccontextmanager
async def _redis(settings: Settings) -> AsyncIterator[Redis]:
    redis = connect(settings.redis_url)
    try:
        yield redis
    finally:
        await redis.aclose()


async def _chat(settings: Settings, session: str) -> int:
    policy = load_policy(settings)
    actor = Actor(platform="console", user_id=getpass.getuser())
    async with _redis(settings) as redis:
        runtime = build_runtime(
            settings, policy, redis, ConsoleChannel(sys.stdout), extra_admins=[actor.key]
        )
        chat = ConsoleChat(runtime, f"console:{session}", actor, sys.stdin, sys.stdout)
        background = [
            asyncio.create_task(chat.sweep_forever(SWEEP_INTERVAL)),
            asyncio.create_task(keep_policy_fresh(runtime.policies, settings.policy_file)),
        ]
        try:
            return await chat.serve()
        finally:
            for task in background:
                task.cancel()


async def _approvals(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.redis_url:
        raise SettingsError("REDIS_URL: required for `clawgate approvals` (approvals live there)")
    policy = load_policy(settings)
    async with _redis(settings) as redis:
        runtime = build_runtime(settings, policy, redis, ConsoleChannel(sys.stdout))
        return await run_approvals_command(runtime, args, sys.stdout)


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
            )
        )
    from bot.bench.runtime import run_bench  # noqa: PLC0415 - only the bench needs it

    return asyncio.run(
        run_bench(settings, args.target, args.calls, args.turns or 500, args.bash_calls)
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("chat", "serve", "worker") and hasattr(signal, "SIGHUP"):
        # SIGHUP reloads the policy once running; until then it must not end the process.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        settings = load_settings()
        configure_logging(settings.log_level, settings.log_format, sys.stderr)
        if args.command == "chat":
            return asyncio.run(_chat(settings, args.session))
        if args.command == "audit":
            return run_audit_command(settings, args)
        if args.command == "policy":
            return run_policy_command(settings, args)
        if args.command == "trace":
            return run_trace_command(settings, args)
        if args.command == "approvals":
            return asyncio.run(_approvals(settings, args))
        if args.command in ("serve", "worker"):
            return asyncio.run(_serve(settings, http=args.command == "serve"))
        return _bench(settings, args)
    except (SettingsError, PolicyFileError) as exc:
        for line in str(exc).splitlines():
            print(f"clawgate: {line}", file=sys.stderr)
        return 2
    except RedisError as exc:  # what a command did not handle itself: one line, no traceback
        print(f"clawgate: cannot reach Redis ({exc})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
