"""Slack payloads to `Inbound`: which session (thread) an input belongs to, who sent it and
what they said. Pure functions: the same payload always gives the same `Inbound`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.commands import decision_target
from adapters.help import SLACK_COMMANDS
from adapters.slack.answers import BAD, FEEDBACK, GOOD
from adapters.slack.payloads import (
    BlockActions,
    Malformed,
    MessageEvent,
    ModalContext,
    SlackFile,
    SlashCommand,
    ViewSubmission,
)
from adapters.slack.text import clean_text, mentions
from runtime.attachments import stored_name
from runtime.models import Actor, ConversationRef
from runtime.queue.inbound import Attachment, Inbound
from runtime.store.keys import check_session_id
from runtime.tools.clarify import option_number

PLATFORM = "slack"
APPROVE_ONCE = "clawgate_approve_once"
APPROVE_ALWAYS = "clawgate_approve_always"
REJECT = "clawgate_reject"
REJECT_VIEW = "clawgate_reject"
REASON_BLOCK = "reason"
REASON_INPUT = "reason"
EDIT = "clawgate_edit"  # the button; its value is `<approval id>\n<arguments to prefill>`
EDIT_VIEW = "clawgate_edit"
ARGUMENTS_BLOCK = "arguments"
ARGUMENTS_INPUT = "arguments"
# A question's option buttons: `clarify_answer_<n>`, value `<question id>:<n>` (1-based).
CLARIFY_ANSWER = "clarify_answer"
COMMANDS = SLACK_COMMANDS
# Message subtypes that are people talking; edits, joins, deletions and the like are not.
_SPOKEN_SUBTYPES = (None, "thread_broadcast", "file_share")


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """The bot as Slack knows it (from `auth.test`)."""

    team_id: str
    bot_user_id: str
    bot_id: str


def conversation(
    team: str, channel: str, thread_ts: str | None, private: bool = False, user: str = ""
) -> ConversationRef:
    """`private`: the payload says it is a direct message or a group DM (mpim), which the
    policy's `direct_messages` opens or closes like a DM. `user`: who asked (an answer is
    streamed to them: Slack needs the recipient of a stream outside a DM)."""
    data = {"channel": channel}
    if thread_ts:
        data["thread_ts"] = thread_ts
    if user:
        data["user"] = user
    direct = private or channel.startswith("D")  # D…: Slack's direct-message channels
    return ConversationRef(
        platform=PLATFORM, id=f"slack:{team}:{channel}", data=data, direct=direct
    )


def _private_name(name: str | None) -> bool:
    """A channel name as slash commands and clicks carry it: a DM's or a group DM's."""
    return name == "directmessage" or (name or "").startswith("mpdm-")


def session_of(team: str, channel: str, thread_ts: str | None) -> str:
    """Raises `Malformed` for ids no Slack sends (a space or a brace: no session key)."""
    try:
        return check_session_id(f"slack:{team}:{channel}" + (f":{thread_ts}" if thread_ts else ""))
    except ValueError as exc:
        raise Malformed("a team, channel or thread id that Slack never sends") from exc


def _actor(user: str) -> Actor:
    return Actor(platform=PLATFORM, user_id=user)


def attachments(files: list[SlackFile]) -> tuple[Attachment, ...]:
    """A message's files as the worker downloads them (adapters/slack/reading.py). Names are
    made unique within the message (two `screenshot.png`s are two files on disk)."""
    found: list[Attachment] = []
    taken: set[str] = set()
    for file in files:
        name = stored_name(file.name or file.title or file.id)
        if name in taken:
            stem, dot, ext = name.rpartition(".")
            name = f"{stem}-{file.id}.{ext}" if dot and stem else f"{name}-{file.id}"
        taken.add(name)
        source = {"url": file.url_private_download} if file.url_private_download else {}
        if file.file_access:
            source["file_access"] = file.file_access
        if file.mode:
            source["mode"] = file.mode
        kind = "image" if file.mimetype.startswith("image/") else "file"
        found.append(
            Attachment(
                key=file.id,
                name=name,
                mimetype=file.mimetype,
                size=file.size,
                kind=kind,
                source=source,
            )
        )
    return tuple(found)


def _is_dm(event: MessageEvent) -> bool:
    return event.channel_type == "im" or event.channel.startswith("D")


def message_inbound(
    event: MessageEvent, event_id: str, team: str, me: SlackIdentity
) -> Inbound | None:
    """A mention, a DM or a reply in a thread; None for what the bot should not answer (its
    own and other bots' messages, edits, channel chatter that does not mention it)."""
    if event.bot_id or event.subtype not in _SPOKEN_SUBTYPES or not event.user:
        return None
    if event.edited is not None:
        # Slack sends `app_mention` again, same ts, each time a mention is edited: past the
        # dedupe window that would run the request a second time.
        return None
    if event.user == me.bot_user_id:
        return None
    if event.type == "app_mention" and event.channel_type is None and event.channel[:1] == "G":
        # A group DM or a legacy private channel: the `message` event of the same message
        # (the same dedupe key) says which, and a group DM counts as a direct message.
        return None
    mentioned = event.type == "app_mention" or mentions(event.text, me.bot_user_id)
    needs_session = False
    if _is_dm(event):
        thread = event.thread_ts
    elif mentioned:
        thread = event.thread_ts or event.ts  # a top-level mention starts a thread
    elif event.thread_ts:
        thread, needs_session = event.thread_ts, True  # only threads the bot is part of
    else:
        return None
    text = clean_text(event.text, me.bot_user_id)
    files = attachments(event.files)
    if not text and not files:
        return None
    return Inbound(
        platform=PLATFORM,
        event_id=event_id,
        # The same message arrives as `app_mention` and as `message` (different event ids).
        dedupe_keys=(f"slack:event:{event_id}", f"slack:message:{event.channel}:{event.ts}"),
        session=session_of(team, event.channel, thread),
        conversation=conversation(
            team, event.channel, thread, event.channel_type in ("im", "mpim"), event.user
        ),
        actor=_actor(event.user),
        text=text,
        message=event.ts,
        attachments=files,
        needs_session=needs_session,
        approval_id=decision_target(text),
    )


def command_inbound(command: SlashCommand) -> Inbound:
    """`/approve …`, `/reject …`, `/mode …`, `/clawgate …`. Slack does not say which thread a slash
    command was typed in, so it belongs to the channel (or DM) as a whole."""
    text = f"{command.command} {command.text}".strip()
    return Inbound(
        platform=PLATFORM,
        event_id=command.trigger_id,
        dedupe_keys=(f"slack:trigger:{command.trigger_id}",),
        session=session_of(command.team_id, command.channel_id, None),
        conversation=conversation(
            command.team_id, command.channel_id, None, _private_name(command.channel_name)
        ),
        actor=_actor(command.user_id),
        text=text,
        reply={"response_url": command.response_url or ""},
        approval_id=decision_target(text),
    )


def action_thread(payload: BlockActions) -> str | None:
    message = payload.message
    return (
        payload.container.thread_ts
        or (message.thread_ts if message else None)
        or payload.container.message_ts
    )


def action_inbound(payload: BlockActions) -> Inbound | None:
    """An Approve button: the same as typing `/approve <id> [always]` in the thread; a
    question's option: `/answer <id> <n>`."""
    action = payload.actions[0]
    question_id, _, option = action.value.partition(":")
    if action.action_id.startswith(CLARIFY_ANSWER) and option_number(option) is not None:
        return _clicked(payload, f"/answer {question_id} {option}", approval_id=question_id)
    if action.action_id in (APPROVE_ONCE, APPROVE_ALWAYS) and action.value:
        scope = " always" if action.action_id == APPROVE_ALWAYS else ""
        text = f"/approve {action.value}{scope}"
        return _clicked(payload, text, approval_id=action.value)
    return None


def feedback_inbound(payload: BlockActions) -> Inbound | None:
    """👍 or 👎 under an answer (`answers.feedback_blocks`): recorded by the worker, once."""
    action = payload.actions[0]
    value, _, key = action.value.partition(" ")
    if action.action_id != FEEDBACK or value not in (GOOD, BAD):
        return None
    return _clicked(
        payload,
        value,
        message=payload.container.message_ts or "",
        source={"answer": key},
        reply={"response_url": payload.response_url or ""},
        kind="feedback",
    )


def _clicked(payload: BlockActions, text: str, **fields: Any) -> Inbound:
    """A button click as an input of the thread it was clicked in, deduped by its trigger."""
    team, channel, thread = payload.team.id, payload.channel.id, action_thread(payload)
    return Inbound(
        platform=PLATFORM,
        event_id=payload.trigger_id,
        dedupe_keys=(f"slack:trigger:{payload.trigger_id}",),
        session=session_of(team, channel, thread),
        conversation=conversation(team, channel, thread, _private_name(payload.channel.name)),
        actor=_actor(payload.user.id),
        text=text,
        **fields,
    )


def _field(submission: ViewSubmission, block: str, element: str) -> str:
    values = submission.view.state.get("values", {})
    field = values.get(block, {}).get(element, {})
    value = field.get("value") if isinstance(field, dict) else None
    return str(value or "")


def reason_of(submission: ViewSubmission) -> str:
    return " ".join(_field(submission, REASON_BLOCK, REASON_INPUT).split())


def modal_inbound(submission: ViewSubmission) -> Inbound:
    """A modal submitted, as what it stands for typed in the thread of the notice: the reject
    modal is `/reject <id> <reason>`, the edit modal `/approve <id> edit <arguments>`."""
    context = ModalContext.model_validate_json(submission.view.private_metadata)
    if submission.view.callback_id == EDIT_VIEW:
        arguments = _field(submission, ARGUMENTS_BLOCK, ARGUMENTS_INPUT).strip() or "{}"
        text = f"/approve {context.approval_id} edit {arguments}"
    else:
        text = f"/reject {context.approval_id} {reason_of(submission)}".strip()
    team = submission.home
    return Inbound(
        platform=PLATFORM,
        event_id=submission.view.id,
        dedupe_keys=(f"slack:view:{submission.view.id}",),
        session=session_of(team, context.channel, context.thread_ts),
        conversation=conversation(team, context.channel, context.thread_ts),
        actor=_actor(submission.user.id),
        text=text,
        approval_id=context.approval_id,
    )
