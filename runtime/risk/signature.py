"""The key of an "approve always" rule: for bash the command signature, for file tools the
path (`standing_rule`)."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePath
from typing import Any

from runtime.risk.shell import parse_shell
from runtime.risk.static_shell import NotStatic, parse_static
from runtime.risk.tables import (
    INTERPRETERS,
    MULTI_COMMAND,
    OTHER_SHELLS,
    RELEASE_WORDS,
    SCRIPT_RUNNERS,
    SHELLS,
    TASK_RUNNERS,
)
from runtime.risk.words import basename, is_literal, is_system_word

# -- "approve always" signatures ----------------------------------------------------------------


def command_signature(command: str) -> str | None:
    """The key for an "approve always" rule: the program, its subcommand for programs that
    have them, and its sorted flags (`rm -rf`); for a network client the whole command as
    written, its destination, refspecs, paths and options in their order (`git push origin
    HEAD:refs/heads/feature`, `scp f host:dir`). None when no standing rule may cover the
    command: anything but one plain command, or one whose meaning the flags do not capture
    (wrappers, shells, variables, programs run by path)."""
    try:
        script = parse_static(command)
    except NotStatic:
        return None
    if any(word.pattern is not None for c in script.commands for word in c.words):
        return None  # `cp .e* x` expands to other files than the approved call named
    analysis = parse_shell(command)
    if not analysis.is_simple:
        return None
    segment = analysis.segments[0]
    if segment.assignments or segment.expandable or not segment.argv:
        return None  # `rm *` may expand to `rm -rf ...`
    word, rest = segment.argv[0], list(segment.argv[1:])
    name = basename(word)
    if not is_literal(word) or not is_system_word(word) or name in NO_SIGNATURE:
        return None
    if name.startswith(INTERPRETERS):
        return None  # `python3 x.py` approved always would cover any code
    if name in MULTI_COMMAND and rest and rest[0].startswith("-"):
        return None  # options before the subcommand (git -c ...) change what it means
    if name == "git" and rest[:1] == ["push"] and any(arg.startswith("+") for arg in rest):
        return None  # +refspec forces a push without any flag
    if name in NETWORK_CLIENTS or (name == "git" and rest[:1] and rest[0] in GIT_NETWORK):
        # Where it connects and what it sends or fetches: an option's value stays beside
        # the option (`ssh -p 22 host`), so only this exact call is covered.
        return shlex.join([name, *rest])
    positional = [arg for arg in rest if not arg.startswith("-")]
    kept = _signature_words(name, positional)
    flags = sorted({arg for arg in rest if arg.startswith("-")})
    return " ".join([name, *kept, *flags])


def _signature_words(name: str, positional: list[str]) -> list[str]:
    """The positional words that change what a command does, so a rule approved for
    `npm run test` or `make build` never covers `npm run deploy` or `make deploy`."""
    if name in TASK_RUNNERS:
        return positional
    kept = positional[:1] if name in MULTI_COMMAND else []
    if kept and kept[0] in SCRIPT_RUNNERS:
        kept = positional[:2]
    kept += [
        word
        for word in positional[len(kept) :]
        if RELEASE_WORDS & set(re.split(r"[^a-z0-9]+", word.lower()))
    ]
    return kept


NO_SIGNATURE = (
    frozenset(
        {
            "env", "nohup", "time", "nice", "timeout", "stdbuf", "ionice", "command",
            "builtin", "exec", "xargs", "sudo", "doas", "eval", "source", ".",
        }
    )
    | SHELLS
    | OTHER_SHELLS
)  # fmt: skip
# Programs whose every word decides where they connect and what they send or fetch: a rule
# for them is that exact call (the docs promise a network rule covers its exact address).
NETWORK_CLIENTS = frozenset(
    {"curl", "wget", "ssh", "scp", "rsync", "nc", "ncat", "socat", "ftp", "sftp", "telnet",
     "sshpass", "mosh", "lftp", "http", "https", "xh", "aria2c", "redis-cli", "psql", "mysql",
     "mongosh"}
)  # fmt: skip
# git subcommands that reach a remote (or change which one later calls reach).
GIT_NETWORK = frozenset(
    {"push", "fetch", "pull", "clone", "ls-remote", "remote", "submodule", "archive",
     "request-pull", "send-email"}
)  # fmt: skip


RULE_SEPARATOR = "\x1f"


def standing_rule(tool: str, arguments: dict[str, Any]) -> str | None:
    """The key of an "approve always" rule covering this call, or None when no standing rule
    may ever cover it (bash chains, redirections, substitutions, unparseable commands).

    bash: the tool plus the parsed command signature (`rm -rf`, `git push --force`);
    file tools: the tool plus the path; any other tool: the tool itself (an MCP tool,
    `<server>.<tool>`, whatever its arguments: its risk reasons name the tool's signature, so
    a grant covers only the version of the tool it was approved for)."""
    if "." in tool:
        return tool
    if tool == "bash":
        signature = command_signature(str(arguments.get("command", "")))
        return None if signature is None else f"bash{RULE_SEPARATOR}{signature}"
    if "path" in arguments:
        return f"{tool}{RULE_SEPARATOR}{PurePath(str(arguments['path'])).as_posix()}"
    return tool
