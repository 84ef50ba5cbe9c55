"""The `clawgate` command."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import sys

from adapters.console.channel import ConsoleChannel
from adapters.console.chat import ConsoleChat
from bot.policy_file import PolicyFileError, load_policy_file
from bot.settings import Settings, SettingsError, load_settings
from bot.wiring import build_runtime
from runtime.models import Actor
from runtime.store.connection import connect


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clawgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="chat with the assistant in this terminal")
    chat.add_argument("--session", default="local", help="session name (default: local)")
    bench = sub.add_parser("bench", help="measure performance")
    bench.add_argument("target", choices=["runtime"], help="what to measure")
    bench.add_argument("--calls", type=int, default=20_000, help="tool calls to time")
    bench.add_argument("--turns", type=int, default=500, help="demo-model turns to time")
    return parser


async def _chat(settings: Settings, session: str) -> int:
    policy = load_policy_file(settings.policy_file)
    redis = connect(settings.redis_url)
    try:
        channel = ConsoleChannel(sys.stdout)
        runtime = build_runtime(settings, policy, redis, channel)
        actor = Actor(platform="console", user_id=getpass.getuser())
        chat = ConsoleChat(runtime, f"console:{session}", actor, sys.stdin, sys.stdout)
        return await chat.serve()
    finally:
        await redis.aclose()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        logging.basicConfig(
            level=settings.log_level,
            format="%(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
        if args.command == "chat":
            return asyncio.run(_chat(settings, args.session))
        from bot.bench import run_bench  # noqa: PLC0415 - only the bench needs it

        return asyncio.run(run_bench(settings, args.target, args.calls, args.turns))
    except (SettingsError, PolicyFileError) as exc:
        for line in str(exc).splitlines():
            print(f"clawgate: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
