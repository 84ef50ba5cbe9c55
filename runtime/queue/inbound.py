"""`Inbound`: one message, command or button click, normalized by an adapter, queued for a
worker. The worker hands it back to the adapter layer for dispatch; the runtime itself only
stores and orders these."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.models import Actor, ConversationRef


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
    # Adapter-only data for answering the sender privately (e.g. Slack's response_url).
    reply: dict[str, str] = Field(default_factory=dict)
    # A message in a thread the bot has not joined: run only if the session already exists.
    needs_session: bool = False
    # The approval a decision (button, /approve, /reject) is about: it is queued in that
    # approval's session, so it never runs beside that session's own messages.
    approval_id: str | None = None
    # "release": run the messages a session held while it waited (after an expiry).
    kind: Literal["input", "release"] = "input"
    received_at: float = Field(default_factory=time.time)
