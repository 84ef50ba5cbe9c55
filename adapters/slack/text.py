"""Slack's text conventions: mentions and links in `<...>`, `&`, `<`, `>` escaped; messages
cut under Slack's limits (`MAX_TEXT`)."""

from __future__ import annotations

import re

MAX_TEXT = 3_900  # Slack recommends ~4,000 characters per message (hard limit 40,000)

_USER = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL = re.compile(r"<#([A-Z0-9]+)(?:\|([^>]*))?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|[^>]*)?>")
_SPECIAL = re.compile(r"<!(\w+)(?:\^[^>|]*)?(?:\|([^>]*))?>")
_KEY = re.compile(r"(?<![\w:])slack:([UW][A-Z0-9_]+)\b")  # a person as clawgate names them


def clean_text(text: str, bot_user_id: str) -> str:
    """What the person typed: the bot's own mention removed, other markup made plain and
    `&amp;`/`&lt;`/`&gt;` unescaped (so `echo a &gt;&gt; f` reaches the model as typed)."""
    text = text.replace(f"<@{bot_user_id}>", " ")
    text = _USER.sub(lambda m: f"@{m.group(1)}", text)
    text = _CHANNEL.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _SPECIAL.sub(lambda m: m.group(2) or f"@{m.group(1)}", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text.strip()


def mentions(text: str, bot_user_id: str) -> bool:
    return f"<@{bot_user_id}>" in text or f"<@{bot_user_id}|" in text


def escape(text: str) -> str:
    """Plain text as Slack message text: only these three characters are special."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def own_text(text: str) -> str:
    """clawgate's own words (answers to commands, notes) as Slack text: escaped, and the
    people they name by key (`slack:U0123ABCD`) as mentions, which Slack shows by name."""
    return _KEY.sub(r"<@\1>", escape(text))
