"""`Inbound`: one message, command or button click, normalized by an adapter, queued for a
worker. The worker hands it back to the adapter layer for dispatch; the runtime itself only
stores and orders these."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.approval.grants import GrantScope, GrantTerms
from runtime.models import Actor, ConversationRef


class Attachment(BaseModel):
    """A file or image a person attached to a message, as the platform names it; the worker
    downloads it (adapters/<platform>/reading.py), never the HTTP handler. `source` is
    adapter-only data for the download (Slack's `url_private_download`, Feishu's message id
    and resource type)."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(min_length=1)  # the platform's id of the file (Slack file id, Feishu key)
    name: str
    mimetype: str = "application/octet-stream"
    size: int | None = None  # bytes, when the payload says
    kind: Literal["file", "image", "media"] = "file"
    source: dict[str, str] = Field(default_factory=dict)


class DecisionRequest(BaseModel):
    """A decision made outside a chat (the operator CLI, the web console), queued for a worker
    to carry out as it does a click: approve or reject, why, "always" with its terms, the
    call's arguments as edited (JSON), and `reply`, the request's id, under which the worker
    tells the decider what came of it (runtime/queue/remote.py)."""

    model_config = ConfigDict(frozen=True)

    approve: bool
    reason: str | None = None
    always: bool = False
    scope: GrantScope = "here"
    seconds: float | None = None
    edit: str | None = None
    reply: str = Field(min_length=1)
    # Made in the web console by a signed-in person: it counts as made in the approval's
    # conversation (the console checked who they are; the operator CLI needs no such check).
    # Only the console sets it; anyone who can write the inbox can forge any entry anyway.
    # The worker checks again who may decide (not `[access]`, not whether the session lives).
    console: bool = False

    def grant(self) -> GrantTerms | None:
        return GrantTerms(self.scope, self.seconds) if self.approve and self.always else None


class Inbound(BaseModel):
    model_config = ConfigDict(frozen=True)

    platform: str
    event_id: str = Field(min_length=1)  # the platform's id, for logs
    # Everything that identifies this input across redeliveries and event types (e.g. the event
    # id and the message's channel+ts): if any was seen before, the input is a duplicate.
    dedupe_keys: tuple[str, ...] = Field(min_length=1)
    session: str  # runs of one session are processed one at a time, in arrival order
    conversation: ConversationRef
    actor: Actor
    text: str  # what the person said; commands (also from buttons) are command text
    # The platform's id of the message (Slack `ts`, Feishu `message_id`): where thread context
    # starts and attachments are filed; "" for clicks and slash commands.
    message: str = ""
    attachments: tuple[Attachment, ...] = ()
    # Adapter-only data for reading the message in the worker: where it sits in its thread and
    # what kind it is (Feishu's root_id, parent_id, thread_id, create_time, message type).
    source: dict[str, str] = Field(default_factory=dict)
    # Adapter-only data for answering the sender privately (e.g. Slack's response_url).
    reply: dict[str, str] = Field(default_factory=dict)
    # A message in a thread the bot has not joined: run only if the session already exists.
    needs_session: bool = False
    # The approval a decision (button, /approve, /reject) is about: it is queued in that
    # approval's session, so it never runs beside that session's own messages.
    approval_id: str | None = None
    # "release": run the messages a session held while it waited (after an expiry);
    # "feedback": 👍/👎 on an answer (`text` "good" or "bad", `source["answer"]` its key);
    # "decision": `decision`, made outside the chat by `actor`, on `approval_id`.
    kind: Literal["input", "release", "feedback", "decision"] = "input"
    decision: DecisionRequest | None = None
    received_at: float = Field(default_factory=time.time)
