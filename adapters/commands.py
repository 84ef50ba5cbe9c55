"""Parsing chat commands, shared by every adapter.

`/approve <id> [once|always]`, `/reject <id> [reason]`, `/cancel`, `/pending`,
`/policy show|allow <tool>|deny <tool>|reset <tool>`, `/help`; `/clawgate <cmd> ...` is the
namespaced form of each.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

CommandName = Literal["approve", "reject", "cancel", "pending", "policy", "help"]
NAMES: tuple[CommandName, ...] = ("approve", "reject", "cancel", "pending", "policy", "help")
POLICY_ACTIONS = ("show", "allow", "deny", "reset")


class Command(BaseModel):
    name: CommandName
    approval_id: str | None = None
    scope: Literal["once", "always"] = "once"
    reason: str | None = None
    policy_action: str | None = None
    tool: str | None = None


class CommandError(Exception):
    """A message that is clearly a command but malformed; the text says how to write it."""


def parse_command(text: str) -> Command | None:
    """A `Command` for command text, None for ordinary messages; raises `CommandError` for a
    known command with bad arguments. Unknown `/words` are ordinary messages (paths, etc.)."""
    words = text.strip().split(maxsplit=1)
    if not words or not words[0].startswith("/"):
        return None
    head, rest = words[0][1:].lower(), (words[1] if len(words) > 1 else "")
    namespaced = head == "clawgate"
    if namespaced:
        words = rest.split(maxsplit=1)
        if not words:
            return Command(name="help")
        head, rest = words[0].lstrip("/").lower(), (words[1] if len(words) > 1 else "")
    if head not in NAMES:
        if namespaced:  # clearly meant for us: say so instead of sending it to the model
            raise CommandError(f"unknown command {head!r}; try /clawgate help")
        return None
    name = NAMES[NAMES.index(head)]
    args = rest.split()
    if name in ("approve", "reject"):
        return _decision(name, rest)
    if name == "policy":
        return _policy(args)
    if args:
        raise CommandError(f"/{name} takes no arguments")
    return Command(name=name)


def _decision(name: CommandName, rest: str) -> Command:
    parts = rest.split(maxsplit=1)
    if not parts:
        usage = "/approve <id> [once|always]" if name == "approve" else "/reject <id> [reason]"
        raise CommandError(f"usage: {usage}")
    approval_id, tail = parts[0], (parts[1].strip() if len(parts) > 1 else "")
    if name == "approve":
        tail = tail.lower()
    if name == "reject":
        return Command(name=name, approval_id=approval_id, reason=tail or None)
    if tail not in ("", "once", "always"):
        raise CommandError("usage: /approve <id> [once|always]")
    return Command(
        name=name, approval_id=approval_id, scope="always" if tail == "always" else "once"
    )


def _policy(args: list[str]) -> Command:
    action = args[0].lower() if args else "show"
    if action not in POLICY_ACTIONS:
        raise CommandError("usage: /policy show|allow <tool>|deny <tool>|reset <tool>")
    if action == "show":
        if len(args) > 1:
            raise CommandError("usage: /policy show")
        return Command(name="policy", policy_action="show")
    if len(args) != 2:
        raise CommandError(f"usage: /policy {action} <tool>")
    return Command(name="policy", policy_action=action, tool=args[1])


def decision_target(text: str) -> str | None:
    """The approval id of an `/approve` or `/reject` (also namespaced), else None."""
    try:
        command = parse_command(text)
    except CommandError:
        return None
    if command is None or command.name not in ("approve", "reject"):
        return None
    return command.approval_id
