"""How `clawgate` commands fail: one line per problem on stderr, never a traceback (unless
`clawgate --debug …`).

- exit 2: a bad setting or argument (`SettingsError`, `PolicyFileError`, argparse's usage);
- exit 1: something the command needs is not available (`Unavailable`: a service that does
  not answer, a port already taken), or the command failed;
- exit 130: interrupted (Ctrl-C)."""

from __future__ import annotations


class Unavailable(Exception):
    """Something clawgate needs is not available now; the message names it and why."""
