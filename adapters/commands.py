"""Parsing chat commands, shared by every adapter.

`/approve <id> [once|always [thread|here|everywhere] [for <duration>]|edit <json>]`, `/reject <id>
[reason]`, `/answer <id> <number or words>`, `/cancel`, `/pending`, `/policy show|grants|allow
<tool>|deny <tool>|reset <tool>|revoke <grant>`, `/mode [name]`, `/model [name]`, `/console`,
`/help`;
`/clawgate <cmd> ...` is the namespaced form of each.
"""

from __future__ import annotations

from typing import Literal, cast

from pydantic import BaseModel

from runtime.approval.grants import GrantScope, GrantTerms, parse_duration

CommandName = Literal[
    "approve", "reject", "answer", "cancel", "pending", "policy", "mode", "model", "console", "help"
]
NAMES: tuple[CommandName, ...] = (
    "approve",
    "reject",
    "answer",
    "cancel",
    "pending",
    "policy",
    "mode",
    "model",
    "console",
    "help",
)
ANSWER_USAGE = "/answer <id> <option number or words>"
POLICY_ACTIONS = ("show", "grants", "allow", "deny", "reset", "revoke")
APPROVE_USAGE = (
    "/approve <id> [once|always [thread|here|everywhere] [for 30m|2h|7d]|edit <json arguments>]"
)
POLICY_USAGE = "/policy show|grants|allow <tool>|deny <tool>|reset <tool>|revoke <grant>"


class Command(BaseModel):
    name: CommandName
    approval_id: str | None = None
    scope: Literal["once", "always"] = "once"
    grant: GrantTerms | None = None  # with "always": how far and how long
    edit: str | None = None  # `/approve <id> edit <json>`: the arguments as the approver wants
    answer: str | None = None  # `/answer <id> <words>`: a question's answer
    reason: str | None = None
    policy_action: str | None = None
    tool: str | None = None  # the tool of allow/deny/reset, the grant id of revoke
    choice: str | None = None  # `/mode <name>`, `/model <name>`; None: show the current one


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
    if name == "answer":
        parts = rest.split(maxsplit=1)
        if len(parts) < 2:
            raise CommandError(f"usage: {ANSWER_USAGE}")
        return Command(name=name, approval_id=parts[0], answer=parts[1].strip())
    if name == "policy":
        return _policy(args)
    if name in ("mode", "model"):
        if len(args) > 1:
            raise CommandError(f"usage: /{name} [name]")
        return Command(name=name, choice=args[0] if args else None)
    if args:
        raise CommandError(f"/{name} takes no arguments")
    return Command(name=name)


def _decision(name: CommandName, rest: str) -> Command:
    parts = rest.split(maxsplit=1)
    if not parts:
        usage = APPROVE_USAGE if name == "approve" else "/reject <id> [reason]"
        raise CommandError(f"usage: {usage}")
    approval_id, tail = parts[0], (parts[1].strip() if len(parts) > 1 else "")
    if name == "approve" and tail[:5].lower() == "edit " and tail[5:].strip():
        return Command(name=name, approval_id=approval_id, edit=tail[5:].strip())
    if name == "approve":
        tail = tail.lower()
    if name == "reject":
        return Command(name=name, approval_id=approval_id, reason=tail or None)
    if tail in ("", "once"):
        return Command(name=name, approval_id=approval_id)
    return Command(name=name, approval_id=approval_id, scope="always", grant=_terms(tail))


def _terms(tail: str) -> GrantTerms:
    """`always [thread|here|everywhere] [for <duration>]`."""
    words = tail.split()
    if words[:1] != ["always"]:
        raise CommandError(f"usage: {APPROVE_USAGE}")
    words = words[1:]
    scope: GrantScope = "here"
    if words and words[0] in ("thread", "here", "everywhere"):
        scope = cast(GrantScope, words.pop(0))
    seconds = None
    if len(words) == 2 and words[0] == "for":
        try:
            seconds = parse_duration(words[1])
        except ValueError as exc:
            raise CommandError(f"{exc}; usage: {APPROVE_USAGE}") from exc
    elif words:
        raise CommandError(f"usage: {APPROVE_USAGE}")
    return GrantTerms(scope, seconds)


def _policy(args: list[str]) -> Command:
    action = args[0].lower() if args else "show"
    if action not in POLICY_ACTIONS:
        raise CommandError(f"usage: {POLICY_USAGE}")
    if action in ("show", "grants"):
        if len(args) > 1:
            raise CommandError(f"usage: /policy {action}")
        return Command(name="policy", policy_action=action)
    if len(args) != 2:
        what = "<grant>" if action == "revoke" else "<tool>"
        raise CommandError(f"usage: /policy {action} {what}")
    return Command(name="policy", policy_action=action, tool=args[1])


def decision_target(text: str) -> str | None:
    """The approval id of an `/approve`, `/reject` or `/answer` (also namespaced), else None."""
    try:
        command = parse_command(text)
    except CommandError:
        return None
    if command is None or command.name not in ("approve", "reject", "answer"):
        return None
    return command.approval_id
