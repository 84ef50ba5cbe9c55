"""Steering: what the requester writes in the thread while their run works joins that run at
its next model step, instead of waiting in the session's lane for the run to end.

At each boundary (the tools' results are in, the model is asked next) the run looks at the
jobs queued behind its own in the lane, one round trip. The leading ones that are plain
messages from the run's requester (no command, no attachments: `Classify`, judged by the
adapter layer, which knows what a command is) join the run: one script appends them to history
and records their jobs as run (runtime/store/runs.py JOIN), then they are acknowledged. A crash
before the script leaves them queued as before; after it, before the acknowledgement, their
jobs find a finished run when they reach the lane's head, or the retaken run acknowledges them
at its next boundary: never lost, never run twice. Anything else behind the run (someone
else's message, a command, a file) keeps its place, and so does everything after it: the lane
stays in arrival order. The requester's `/cancel` anywhere behind the run stops it there instead (a
tool already running finishes first); the `/cancel` is answered in its turn, saying so.
Someone else's `/cancel` waits its turn like any input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from pydantic import ValidationError

from runtime.models import Actor, UserMessage
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import Inbox, Job
from runtime.steer import SENT_MEANWHILE, Steer, Steered
from runtime.store.history import encode_message
from runtime.store.runs import RunJournal

log = logging.getLogger(__name__)

# What an input queued behind a run is to it (the adapter layer judges: it knows what a
# command is): a plain `message` (text, no command, no file), a `cancel`, `aside` (feedback:
# it keeps its place without holding back the messages after it), or `other`.
Kind = Literal["message", "cancel", "aside", "other"]
Classify = Callable[[Inbound], Kind]
LOOK_AHEAD = 8  # jobs behind the run read at one boundary; more join at the next one


class Steering:
    def __init__(self, inbox: Inbox, classify: Classify) -> None:
        self.inbox = inbox
        self.classify = classify

    def port(self, journal: RunJournal, session: str, job: str, requester: Actor) -> Steer:
        """The steering port of the run of `job` (the inbox entry heading `session`'s lane)."""

        async def steer(end: int) -> Steered:
            behind = await self.inbox.behind(session, job, LOOK_AHEAD)
            joining: list[tuple[Job, UserMessage]] = []
            leading = True  # still among the requester's messages right behind the run
            for queued in behind:
                try:
                    inbound = Inbound.model_validate_json(queued.payload)
                except ValidationError:
                    leading = False  # not for a run to judge: its worker reports it
                    continue
                kind = self.classify(inbound)
                if kind == "aside":
                    continue
                mine = inbound.actor.key == requester.key
                # The requester's /cancel stops their run here (answered in its turn:
                # Runtime.cancel); anyone else's waits its turn, as any input, so a thread
                # member cannot cut short a teammate's request.
                if kind == "cancel" and mine:
                    await journal.stop_for(session, queued.id)
                    return Steered(cancel=True)
                leading = leading and kind == "message" and mine
                if leading:
                    text = SENT_MEANWHILE + inbound.text
                    joining.append((queued, UserMessage(content=text, actor=requester.key)))
            if not joining:
                return Steered()
            pairs = [(queued.id, encode_message(message)) for queued, message in joining]
            fates = await journal.join(session, job, end, pairs)
            if fates is None:
                return Steered()  # the run is not the session's latest any more: they wait
            for queued, _ in joining:  # joined now or before: done with either way
                await self.inbox.ack(queued)
            log.info("session %s: %d message(s) joined the running run", session, len(fates))
            joined = [message for (_, message), now in zip(joining, fates, strict=True) if now]
            return Steered(joined)

        return steer
