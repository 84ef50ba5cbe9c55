"""Feishu events (lark-oapi's typed objects) to `Inbound`: sessions, senders, text, the files
attached and where the message sits in its thread (for the worker's reader)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from adapters.commands import decision_target
from adapters.feishu.content import read_content
from runtime.models import Actor, ConversationRef
from runtime.queue.inbound import Inbound
from runtime.tools.clarify import option_number

PLATFORM = "feishu"
APPROVE_ONCE = "approve_once"
APPROVE_ALWAYS = "approve_always"
REJECT = "reject"
EDIT = "edit"  # the edit form's submit button; the form's input is `ARGUMENTS`
ARGUMENTS = "arguments"
ANSWER = "answer"  # a question's option: the button's value names it (`option`, 1-based)
EDIT_BUTTON = "clawgate_edit_"  # + the approval id: the submit button's name


def edit_button(approval_id: str) -> str:
    """The edit form's submit button's name, which a submit calls back with (`action.name`)
    whether or not it carries the button's callback value too."""
    return EDIT_BUTTON + approval_id


_MENTION_KEY = re.compile(r"@_user_\d+")


@dataclass(frozen=True, slots=True)
class FeishuIdentity:
    """The bot as Feishu knows it (from /bot/v3/info)."""

    open_id: str


def conversation(
    tenant: str, chat_id: str, message_id: str | None, in_thread: bool, direct: bool = False
) -> ConversationRef:
    """`message_id` is the message replies answer (in its thread when `in_thread`); `direct`:
    a p2p chat with the bot."""
    data = {"chat_id": chat_id}
    if message_id:
        data["message_id"] = message_id
    if in_thread:
        data["thread"] = "1"
    return ConversationRef(
        platform=PLATFORM, id=f"feishu:{tenant}:{chat_id}", data=data, direct=direct
    )


def session_of(tenant: str, chat_id: str, root_id: str | None) -> str:
    return f"feishu:{tenant}:{chat_id}" + (f":{root_id}" if root_id else "")


def clean_text(text: str, mentions: list[Any], bot_open_id: str) -> tuple[str, bool]:
    """The text with the bot's mention removed and others as @name; and whether the bot was
    mentioned."""
    names: dict[str, str] = {}  # mention key -> what it becomes in the text
    mentioned = False
    for mention in mentions:
        key = getattr(mention, "key", None) or ""
        if getattr(getattr(mention, "id", None), "open_id", None) == bot_open_id:
            mentioned, names[key] = True, ""
        else:
            names[key] = f"@{getattr(mention, 'name', None) or 'someone'}"
    # One pass, whole keys only: "@_user_1" must not eat the start of "@_user_10".
    text = _MENTION_KEY.sub(lambda m: f" {names.get(m.group(0), '')} ", text)
    return tidy(text), mentioned


def tidy(text: str) -> str:
    """Runs of spaces made one, except in code blocks (a post's, or fenced in a text): there
    indentation is meaning. Lines stay lines."""
    lines, fenced = [], False
    for line in text.strip().splitlines():
        fence = line.lstrip().startswith("```")
        lines.append(line.rstrip() if fenced and not fence else " ".join(line.split()))
        fenced ^= fence
    return "\n".join(lines).strip()


def message_inbound(data: Any, me: FeishuIdentity) -> Inbound | None:
    """`im.message.receive_v1`: p2p messages; group messages that mention the bot (or reply
    in a thread it is part of). The bot's own and other apps' messages are ignored. A kind
    not read yet (a sticker…) is queued too, so the worker tells the sender what is read."""
    header, event = data.header, data.event
    sender, message = event.sender, event.message
    open_id = sender.sender_id.open_id if sender.sender_id else None
    if sender.sender_type != "user" or not open_id or open_id == me.open_id:
        return None
    content = read_content(message.message_type or "", message.content or "")
    if content is None:
        return None
    text, mentioned = clean_text(content.text, list(message.mentions or []), me.open_id)
    tenant = header.tenant_key or sender.tenant_key or "tenant"
    chat_id = message.chat_id
    needs_session = False
    if message.chat_type == "p2p":
        # One session per direct chat: a quote-reply there (which also sets root_id) too.
        root, in_thread = None, False
    elif mentioned:
        root, in_thread = message.root_id or message.message_id, True  # answer in a thread
    elif message.root_id:
        root, in_thread, needs_session = message.root_id, True, True
    else:
        return None
    if not (text or content.attachments or content.unread):
        return None
    return Inbound(
        platform=PLATFORM,
        event_id=header.event_id,
        # Feishu redelivers (for ~7 h, and on reconnect) with the same event id and message.
        dedupe_keys=(f"feishu:event:{header.event_id}", f"feishu:message:{message.message_id}"),
        session=session_of(tenant, chat_id, root),
        conversation=conversation(
            tenant, chat_id, message.message_id, in_thread, message.chat_type == "p2p"
        ),
        actor=Actor(platform=PLATFORM, user_id=open_id),
        text=text,
        message=message.message_id,
        attachments=content.attachments,
        source=_source(message, content.unread),
        reply={"message_id": message.message_id},
        needs_session=needs_session,
        approval_id=decision_target(text),
    )


def _source(message: Any, unread: str | None) -> dict[str, str]:
    """Where the message sits, for the reader: its thread and time; `unread`: its kind."""
    source = {"type": message.message_type or ""}
    for name in ("root_id", "parent_id", "thread_id", "create_time"):
        value = getattr(message, name, None)
        if value:
            source[name] = str(value)
    if unread:
        source["unread"] = unread
    return source


@dataclass(frozen=True, slots=True)
class CardClick:
    """An approval button clicked on a card; `arguments`: the edit form's, submitted."""

    event_id: str
    approval_id: str
    action: str
    actor: Actor
    conversation: ConversationRef
    card_message_id: str
    arguments: str = ""
    option: str = ""  # a question's option chosen

    @property
    def text(self) -> str:
        if self.action == ANSWER:
            return f"/answer {self.approval_id} {self.option}"
        if self.action == REJECT:
            return f"/reject {self.approval_id}"
        if self.action == EDIT:
            return f"/approve {self.approval_id} edit {self.arguments.strip() or '{}'}"
        scope = " always" if self.action == APPROVE_ALWAYS else ""
        return f"/approve {self.approval_id}{scope}"

    def inbound(self, session: str) -> Inbound:
        return Inbound(
            platform=PLATFORM,
            event_id=self.event_id,
            dedupe_keys=(f"feishu:event:{self.event_id}",),
            session=session,
            conversation=self.conversation,
            actor=self.actor,
            text=self.text,
            reply={"message_id": self.card_message_id},
            approval_id=self.approval_id,
        )


def card_click(data: Any) -> CardClick | str | None:
    """`card.action.trigger` of one of our buttons; None for anything else; the refusal to
    toast for a click on one of ours that does not say who clicked, or on which message."""
    header, event = data.header, data.event
    value = event.action.value if event.action else None
    name = event.action.name if event.action else None
    if not value and isinstance(name, str) and name.startswith(EDIT_BUTTON):
        value = {"action": EDIT, "approval_id": name.removeprefix(EDIT_BUTTON)}
    if not isinstance(value, dict) or value.get("action") not in (
        APPROVE_ONCE,
        APPROVE_ALWAYS,
        REJECT,
        EDIT,
        ANSWER,
    ):
        return None
    option = str(value.get("option", ""))
    if value["action"] == ANSWER and option_number(option) is None:
        return None
    form = event.action.form_value or {}
    arguments = form.get(ARGUMENTS) if isinstance(form, dict) else None
    if value["action"] == EDIT and not isinstance(arguments, str):
        return None
    approval_id = value.get("approval_id")
    if not isinstance(approval_id, str):
        return None
    open_id = event.operator.open_id if event.operator else None
    context = event.context
    if not open_id or context is None or not context.open_message_id:
        # No open_id: an app not allowed to read it, or a person outside the tenant. Deciding
        # needs to know who decides: say how to, instead of an empty answer.
        typed = (
            f"/answer {approval_id} <number>"
            if value["action"] == ANSWER
            else f"/approve {approval_id} or /reject {approval_id} <reason>"
        )
        what = "who clicked" if not open_id else "which card this is"
        return f"Feishu did not say {what}: type {typed} in the chat"
    tenant = header.tenant_key or event.operator.tenant_key or "tenant"
    return CardClick(
        event_id=header.event_id,
        approval_id=approval_id,
        action=str(value["action"]),
        actor=Actor(platform=PLATFORM, user_id=open_id),
        conversation=conversation(tenant, context.open_chat_id, context.open_message_id, True),
        card_message_id=context.open_message_id,
        arguments=arguments if isinstance(arguments, str) else "",
        option=option,
    )
