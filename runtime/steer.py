"""The steering port a message's run is given (runtime/queue/steering.py makes it): at each
model step after tools, what its requester sent meanwhile joins the run, or a queued `/cancel`
stops it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from runtime.models import Message

# What the model reads before a message that joined a run: it arrived while the model worked.
SENT_MEANWHILE = "(sent while you were working) "


@dataclass(frozen=True, slots=True)
class Steered:
    """What the port found behind the run: the messages its requester sent meanwhile, which
    joined it (already in history), or a `/cancel`."""

    joined: Sequence[Message] = ()
    cancel: bool = False  # a /cancel is queued behind the run: it stops here


# Given the session's history length the run knows.
Steer = Callable[[int], Awaitable[Steered]]
