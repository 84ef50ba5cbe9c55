"""The command list `/help` answers, as it may be typed where it is asked.

Slack registers a few slash commands (`SLACK_COMMANDS`) and answers any other `/word` typed in
its message box with "not a valid command": there the others are `/clawgate <word>`, and the
list comes in a code block, as Slack's proportional font breaks aligned columns. Elsewhere
(Feishu, the terminal) every command is typed as it is."""

from __future__ import annotations

from collections.abc import Collection

# The slash commands clawgate's Slack app registers (bot/slack_manifest.py makes them).
SLACK_COMMANDS = ("/approve", "/reject", "/answer", "/mode", "/model", "/clawgate")

# (usage, what it does: its lines as shown)
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "/approve <id> [once|always]",
        (
            "run a call that waits for approval (always: also allow",
            "calls like it in this conversation from now on; add",
            "thread or everywhere (admins), and/or for 30m|2h|7d)",
        ),
    ),
    (
        "/approve <id> edit <json>",
        (
            "approve the call with its arguments changed, e.g.",
            '/approve k3x9 edit {"command": "rm -rf build/tmp"}',
        ),
    ),
    (
        "/reject <id> [reason]",
        (
            "refuse it; the model is told who refused and why",
            "(a batch's id: every call of it you may decide)",
        ),
    ),
    (
        "/answer <id> <n|words>",
        (
            "answer the assistant's question to you: an option's",
            "number or text, or your own words when it allows them",
        ),
    ),
    ("/pending", ("approvals and questions waiting in this conversation",)),
    (
        "/cancel",
        (
            "stop this session's running request (at its next step)",
            "or withdraw its pending approval or question",
        ),
    ),
    ("/policy show", ("the tools and approval rules here, and where they come from",)),
    ("/policy grants", ('what "approve always" allows here, by whom, until when',)),
    ("/policy revoke <grant>", ("remove a grant (admins, or whoever granted it)",)),
    ("/policy allow|deny|reset <tool>", ("admins: change a tool's policy in this conversation",)),
    (
        "/mode [plan|ask|auto|edits]",
        (
            "show or switch this conversation's mode: plan runs",
            "nothing that changes anything, ask asks for every change,",
            "auto lets the risk rules decide, edits also accepts",
            "project-file edits (up to the admins' limit)",
        ),
    ),
    ("/model [name]", ("show or switch this conversation's model (admins list them)",)),
    (
        "/clawgate console",
        (
            "a sign-in link to the web console (the approvals inbox),",
            "for you alone; it works once, for 10 minutes",
        ),
    ),
    ("/help", ("this list",)),
)
LAST = "Anything else is a message to the assistant."


def render(registered: Collection[str] | None = None, block: bool = False) -> str:
    """The list; `registered`: the platform's own slash commands (the others go through
    /clawgate); `block`: in a code block."""
    rows = [(_typed(usage, registered), lines) for usage, lines in COMMANDS]
    width = max(len(usage) for usage, _ in rows) + 2
    listed = [
        f"  {(usage if i == 0 else '').ljust(width)}{line}"
        for usage, lines in rows
        for i, line in enumerate(lines)
    ]
    body = "\n".join(listed)
    return f"Commands:\n```\n{body}\n```\n{LAST}" if block else f"Commands:\n{body}\n{LAST}"


def _typed(usage: str, registered: Collection[str] | None) -> str:
    word = usage.split(maxsplit=1)[0]
    if registered is None or word in registered:
        return usage
    return f"/clawgate {usage[1:]}"


HELP = render()


def blocks_for_columns(platform: str) -> bool:
    """Whether aligned columns go in a code block on `platform`: Slack's font is proportional
    and its text renders fences; a terminal's font is fixed, and a Feishu text message would
    show the fences as typed."""
    return platform == "slack"


def help_for(platform: str) -> str:
    """The list as `platform`'s people may type it."""
    return render(SLACK_COMMANDS, block=True) if blocks_for_columns(platform) else HELP
