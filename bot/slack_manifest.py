"""`clawgate slack manifest`: the Slack app manifest for exactly what clawgate uses: the bot
scopes of every Web API method it calls and of every event it handles, its slash commands,
interactivity (buttons and dialogs) and the App Home messages tab (direct messages).

Printed as JSON, which Slack's "Create an app → From a manifest" accepts as well as YAML.
Nothing here loads a platform SDK or reads a setting."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO
from urllib.parse import urlsplit

from adapters.slack.inbound import COMMANDS
from bot.server import SLACK_EVENTS_PATH

APP_NAME = "clawgate"
PLACEHOLDER_HOST = "https://YOUR-HOST"

# Every Slack Web API method clawgate calls with its bot token, and the bot scopes it needs
# (one of them per kind of conversation, so all of them). tests/unit/test_manifest.py finds
# the methods in the code: a call this table does not know fails it.
METHOD_SCOPES: dict[str, tuple[str, ...]] = {
    "auth.test": (),  # who the bot is, at start
    # Socket Mode's token checked at start: the app-level token's connections:write, no bot scope.
    "apps.connections.open": (),
    "chat.postMessage": ("chat:write",),  # answers, approval notices
    "chat.update": ("chat:write",),  # answers set right at their end, notices updated in place
    # An answer streamed into one message as the model writes it.
    "chat.startStream": ("chat:write",),
    "chat.appendStream": ("chat:write",),
    "chat.stopStream": ("chat:write",),
    # The assistant view: a thread's status while tools run, its prompts and its title.
    "assistant.threads.setStatus": ("assistant:write",),
    "assistant.threads.setSuggestedPrompts": ("assistant:write",),
    "assistant.threads.setTitle": ("assistant:write",),
    "chat.postEphemeral": ("chat:write",),  # answers only the asker sees
    "conversations.open": ("im:write",),  # an approver's DM with the bot
    # Reading a thread or a channel back: the messages before a mention (thread context), and
    # whether a failed post landed after all.
    "conversations.replies": ("channels:history", "groups:history", "im:history", "mpim:history"),
    "conversations.history": ("channels:history", "groups:history", "im:history", "mpim:history"),
    "views.open": (),  # the reject and edit dialogs
    "users.info": ("users:read",),  # the names of the people in a thread's context
    # A Slack Connect file's download URL. files:read also lets the bot token download the
    # files people attach (url_private_download), which is no Web API method.
    "files.info": ("files:read",),
    # A file shared in the thread (a long answer's full text): files_upload_v2's two calls.
    "files.getUploadURLExternal": ("files:write",),
    "files.completeUploadExternal": ("files:write",),
}

# What clawgate's listeners take (adapters/slack/app.py MESSAGE_EVENTS, ASSISTANT_EVENTS) →
# the bot events to subscribe to, each with its scope. `message` comes in one event per kind
# of conversation (message.im also brings the assistant view's threads).
EVENT_SUBSCRIPTIONS: dict[str, tuple[str, ...]] = {
    "app_mention": ("app_mention",),
    "message": ("message.channels", "message.groups", "message.im", "message.mpim"),
    "assistant_thread_started": ("assistant_thread_started",),
    "assistant_thread_context_changed": ("assistant_thread_context_changed",),
}
EVENT_SCOPES: dict[str, str] = {
    "assistant_thread_started": "assistant:write",
    "assistant_thread_context_changed": "assistant:write",
    "app_mention": "app_mentions:read",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
    "message.im": "im:history",
    "message.mpim": "mpim:history",
}
COMMAND_SCOPE = "commands"

_COMMAND_HELP: dict[str, tuple[str, str]] = {
    "/approve": ("Approve a tool call that waits for approval", "<id> [once|always]"),
    "/reject": ("Reject a tool call that waits for approval", "<id> [reason]"),
    "/answer": ("Answer the assistant's question to you", "<id> <number or words>"),
    "/mode": ("Show or switch this conversation's mode", "[plan|ask|auto|edits]"),
    "/model": ("Show or switch this conversation's model", "[name]"),
    "/clawgate": ("clawgate: pending, cancel, policy, help", "pending | cancel | help"),
}


def bot_events() -> list[str]:
    return [event for events in EVENT_SUBSCRIPTIONS.values() for event in events]


def bot_scopes(methods: Iterable[str] = METHOD_SCOPES) -> list[str]:
    """The bot scopes `methods`, the subscribed events and the slash commands need."""
    scopes = {scope for method in methods for scope in METHOD_SCOPES[method]}
    scopes |= {EVENT_SCOPES[event] for event in bot_events()}
    scopes.add(COMMAND_SCOPE)
    return sorted(scopes)


def request_url(base: str) -> str:
    """clawgate's Slack endpoint under `base` (`https://host`, or a prefix behind a proxy,
    like `https://host/bots`); raises ValueError for what Slack would refuse."""
    parts = urlsplit(base.strip())
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"{base!r}: Slack needs an https:// URL, like https://bot.example.com")
    if parts.query or parts.fragment:
        raise ValueError(f"{base!r}: give the server's URL without a query or fragment")
    path = parts.path.rstrip("/")
    if not path.endswith(SLACK_EVENTS_PATH):
        path += SLACK_EVENTS_PATH
    return f"https://{parts.netloc}{path}"


def manifest(url: str | None, socket_mode: bool = False) -> dict[str, Any]:
    """The app manifest. `url`: the endpoint (see `request_url`); ignored in Socket Mode,
    where Slack needs no request URL at all."""
    events: dict[str, Any] = {"bot_events": bot_events()}
    interactivity: dict[str, Any] = {"is_enabled": True}
    commands = []
    for command in COMMANDS:
        description, hint = _COMMAND_HELP[command]
        entry = {"command": command, "description": description, "usage_hint": hint}
        commands.append({**entry, "should_escape": False})
    if not socket_mode:
        url = url or f"{PLACEHOLDER_HOST}{SLACK_EVENTS_PATH}"
        events = {"request_url": url, **events}
        interactivity["request_url"] = url
        commands = [{**command, "url": url} for command in commands]
    return {
        "_metadata": {"major_version": 1, "minor_version": 1},
        "display_information": {
            "name": APP_NAME,
            "description": "Team AI assistant: risky tool calls wait for a human's approval",
        },
        "features": {
            "app_home": {
                "home_tab_enabled": False,
                "messages_tab_enabled": True,
                "messages_tab_read_only_enabled": False,
            },
            "bot_user": {"display_name": APP_NAME, "always_online": True},
            # The split-pane assistant: threads with a status, suggested prompts and a title.
            "assistant_view": {
                "assistant_description": "Ask clawgate; risky tool calls wait for approval.",
            },
            "slash_commands": commands,
        },
        "oauth_config": {"scopes": {"bot": bot_scopes()}},
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": socket_mode,
            "token_rotation_enabled": False,
        },
    }


def print_manifest(url: str | None, socket_mode: bool, out: TextIO, err: TextIO) -> int:
    """`clawgate slack manifest`: the manifest on `out` (pasteable as is), advice on `err`."""
    if url is not None and socket_mode:
        print("clawgate: --url and --socket-mode exclude each other", file=err)
        return 2
    try:
        endpoint = request_url(url) if url is not None else None
    except ValueError as exc:
        print(f"clawgate: --url: {exc}", file=err)
        return 2
    json.dump(manifest(endpoint, socket_mode), out, indent=2)
    out.write("\n")
    if socket_mode:
        print(
            "clawgate: Socket Mode: after creating the app, add an app-level token with the "
            "connections:write scope (Basic Information → App-Level Tokens) and set it as "
            "SLACK_APP_TOKEN (xapp-…)",
            file=err,
        )
    elif endpoint is None:
        print(
            f"clawgate: replace every {PLACEHOLDER_HOST}{SLACK_EVENTS_PATH} with your server's "
            "public URL, or run again with --url https://your.host (or with --socket-mode)",
            file=err,
        )
    return 0
