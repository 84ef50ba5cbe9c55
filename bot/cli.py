"""The `clawgate` command. Arguments are parsed first (bot.cli_parser, argparse only); the
runtime, the SDKs and the settings load only for a command that runs (bot.cli_run)."""

from __future__ import annotations

import sys

from bot.cli_parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from bot.cli_run import run_command  # noqa: PLC0415 - --help never loads the runtime

    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
