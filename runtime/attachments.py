"""Files people attach to a message, kept in the work dir where the `read` tool finds them:
`.clawgate/attachments/<message>/<name>`. The platform adapters download (the worker, never
the HTTP handler); this module decides what is taken, where it goes and what the model is told.

A retaken job downloads again only what is not complete yet: a file is written under a
temporary name and renamed into place, so a path that exists holds the whole file.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from runtime.queue.inbound import Attachment

FOLDER = Path(".clawgate") / "attachments"
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
# Types taken by default: what the model can read with `read` or see as an image.
DEFAULT_TYPES = (
    "text/*",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/json",
    "application/x-yaml",
    "application/yaml",
    "application/xml",
    "application/x-sh",
    "application/x-python",
    "application/javascript",
    "application/toml",
    "application/sql",
)
_UNSAFE = re.compile(r"[^\w.\-+@ ()\[\]]")  # what a stored name may hold (no /, no controls)
MAX_NAME = 120


class AttachmentRefused(Exception):
    """Not taken: too large or of a type not allowed; the text says which limit, for the thread."""


@dataclass(frozen=True, slots=True)
class AttachmentLimits:
    max_bytes: int = DEFAULT_MAX_BYTES
    types: tuple[str, ...] = DEFAULT_TYPES  # MIME patterns (`text/*`)

    def refusal(self, attachment: Attachment, size: int | None = None) -> str | None:
        """Why `attachment` is not taken (size: what the download found, if the payload did
        not say), or None."""
        size = attachment.size if size is None else size
        if size is not None and size > self.max_bytes:
            return (
                f"{attachment.name} is {human_size(size)}, over the limit of "
                f"{human_size(self.max_bytes)} (CLAWGATE_ATTACHMENT_MAX_BYTES)"
            )
        kind = attachment.mimetype.split(";")[0].strip().lower()
        if not any(fnmatch.fnmatchcase(kind, pattern) for pattern in self.types):
            return (
                f"{attachment.name} is of type {kind or 'unknown'}, which is not taken "
                f"(CLAWGATE_ATTACHMENT_TYPES)"
            )
        return None


@dataclass(frozen=True, slots=True)
class Stored:
    """An attachment in the work dir: `path` relative to it."""

    attachment: Attachment
    path: Path
    size: int

    @property
    def image(self) -> bool:
        return self.attachment.kind == "image" or self.attachment.mimetype.startswith("image/")

    def line(self) -> str:
        """What the model is told of it, in the user message."""
        how = "an image (shown to you if you take images)" if self.image else "read it with `read`"
        return (
            f"attached: {self.path.as_posix()} ({human_size(self.size)}, "
            f"{self.attachment.mimetype}) — {how}"
        )


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def stored_name(name: str) -> str:
    """A file name that stays one name in one folder: no separators or control characters,
    not `.` or `..`, bounded (the extension kept). A leading dot stays: an attached `.env` is
    judged as the secret its name says when the model reads it."""
    base = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" ").rstrip(".")
    base = base if base.strip(".") else "file"
    if len(base) > MAX_NAME:
        stem, dot, ext = base.rpartition(".")
        keep = dot and len(ext) < 16
        base = f"{stem[: MAX_NAME - len(ext) - 1]}.{ext}" if keep else base[:MAX_NAME]
    return base


def folder_of(message: str) -> Path:
    """The folder of one message's attachments, relative to the work dir."""
    return FOLDER / (stored_name(message) or "message")


# Fetch the file, at most that many bytes: raise AttachmentRefused past them.
Download = Callable[[int], Awaitable[bytes]]


async def store(
    workdir: Path,
    message: str,
    attachment: Attachment,
    download: Download,
    limits: AttachmentLimits,
) -> Stored:
    """Download `attachment` into the message's folder unless a retake did already; raises
    `AttachmentRefused` (nothing is written) when a limit refuses it."""
    refusal = limits.refusal(attachment)
    if refusal is not None:
        raise AttachmentRefused(refusal)
    relative = folder_of(message) / stored_name(attachment.name)
    target = workdir / relative
    if target.is_file():  # complete: only a whole file is ever renamed into place
        return Stored(attachment, relative, target.stat().st_size)
    data = await download(limits.max_bytes)
    refusal = limits.refusal(attachment, len(data))
    if refusal is not None:
        raise AttachmentRefused(refusal)
    await asyncio.to_thread(_write, target, data)
    return Stored(attachment, relative, len(data))


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    with open(partial, "xb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, target)
