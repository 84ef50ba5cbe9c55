"""Steering: what the requester writes in the thread while their run works joins that run at
its next model step, instead of waiting in the session's lane for the run to end.

At each boundary (the tools' results are in, the model is asked next) the run looks at the
jobs queued right behind its own in the lane, one round trip. The leading ones that are plain
messages from the run's requester (no command, no attachments: `Plain`, decided by the adapter
layer, which knows what a command is) join the run: one script appends them to history and
records their jobs as run (runtime/store/runs.py JOIN), then they are acknowledged. A crash
before the script leaves them queued as before; after it, before the acknowledgement, their
jobs find a finished run when they reach the lane's head, or the retaken run acknowledges them
at its next boundary: never lost, never run twice. Anything else behind the run (someone
else's message, a command, a file) keeps its place, and so does everything after it: the lane
stays in arrival order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from runtime.models import Actor, Message, UserMessage
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import Inbox
from runtime.store.history import encode_message
from runtime.store.runs import RunJournal

if TYPE_CHECKING:  # the loop's own imports reach this package (runtime.attachments)
    from runtime.loop import Steer

log = logging.getLogger(__name__)

Plain = Callable[[Inbound], bool]  # an input that is a plain message (the adapters' judgement)
LOOK_AHEAD = 8  # jobs behind the run read at one boundary; more join at the next one
SENT_MEANWHILE = "(sent while you were working) {text}"


class Steering:
    def __init__(self, inbox: Inbox, plain: Plain) -> None:
        self.inbox = inbox
        self.plain = plain

    def port(self, journal: RunJournal, session: str, job: str, requester: Actor) -> Steer:
        """The steering port of the run of `job` (the inbox entry heading `session`'s lane)."""

        async def steer(end: int) -> list[Message]:
            joining: list[tuple[str, UserMessage]] = []
            behind = await self.inbox.behind(session, job, LOOK_AHEAD)
            for queued in behind:
                try:
                    inbound = Inbound.model_validate_json(queued.payload)
                except ValidationError:
                    break  # not for a run to judge: its worker reports it
                if inbound.actor.key != requester.key or not self.plain(inbound):
                    break
                text = SENT_MEANWHILE.format(text=inbound.text)
                joining.append((queued.id, UserMessage(content=text, actor=requester.key)))
            if not joining:
                return []
            pairs = [(job_id, encode_message(message)) for job_id, message in joining]
            fates = await journal.join(session, job, end, pairs)
            if fates is None:
                return []  # the run is not the session's latest any more: they stay queued
            for queued in behind[: len(fates)]:
                await self.inbox.ack(queued)
            log.info("session %s: %d message(s) joined the running run", session, len(fates))
            return [message for (_, message), now in zip(joining, fates, strict=True) if now]

        return steer
