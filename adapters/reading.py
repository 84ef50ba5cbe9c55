"""What the model gets of a person's message: the text, with the thread around it and the
files attached, read by the platform's adapter in the worker (never the HTTP handler).

Each platform may register a `Reader` with the router; without one a message is its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from adapters.thread_context import ContextLimits
from runtime.attachments import AttachmentLimits
from runtime.queue.inbound import Inbound


@dataclass(frozen=True, slots=True)
class Prompt:
    """`text` for the model (the message, thread context before it, attachments named after
    it); `images`: attached images, paths in the work dir."""

    text: str
    images: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ReadingLimits:
    """What every platform's reader is given: the work dir attachments are stored in, and how
    much of a thread and of attached files it takes."""

    workdir: Path
    context: ContextLimits
    attachments: AttachmentLimits


class Reader(Protocol):
    async def read(self, inbound: Inbound, job: str) -> Prompt:
        """The message of `inbound` as the model gets it. Called again for a retaken job:
        it must give the same prompt (downloads are not repeated, context is re-read). A
        prompt without text runs nothing: the reader has told the sender why (a message of a
        kind it cannot read, only files it refused)."""
