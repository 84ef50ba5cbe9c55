"""The `clawgate` command. Arguments are parsed first (bot.cli_parser, argparse only); the
runtime, the SDKs and the settings load only for a command that runs (bot.cli_run)."""

from __future__ import annotations

import sys

from bot.cli_parser import build_parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # a bare `clawgate`: what it can do
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    from bot.cli_run import run_command  # noqa: PLC0415 - --help never loads the runtime

    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
