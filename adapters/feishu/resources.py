"""A Feishu message's images and files into the work dir: downloaded through lark-oapi
(`im.v1.message_resource.get`, `type=image|file`) into `runtime.attachments.store`.

A file's type comes from its name; an image's (and a file's whose name says nothing) only
with the download: Feishu names it in `Content-Type`, else the bytes tell. Such a file is
looked for on disk first, so a retaken job does not download it again either. lark-oapi reads
the whole body (it does not stream): the limit is checked on what arrived, and Feishu itself
serves no resource over 100 MB."""

from __future__ import annotations

import asyncio
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lark_oapi.api.im.v1 import GetMessageResourceRequest

from adapters.feishu.content import UNKNOWN_TYPE
from runtime.attachments import (
    AttachmentLimits,
    AttachmentRefused,
    Stored,
    folder_of,
    store,
    stored_name,
)
from runtime.file_types import image_type
from runtime.queue.inbound import Attachment

SNIFF = 4096  # bytes read to tell a type
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


class DownloadFailed(Exception):
    """Feishu did not hand the file over (its code and message, for the thread and the log)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    data: bytes
    mimetype: str  # what Feishu said, or ""


class Resources:
    def __init__(self, client: Any, workdir: Path, limits: AttachmentLimits) -> None:
        self.client = client
        self.workdir = workdir
        self.limits = limits

    async def take(self, message_id: str, attachment: Attachment) -> Stored:
        """Raises AttachmentRefused (a limit) or DownloadFailed."""

        async def download(most: int) -> bytes:
            data = (await self._fetch(message_id, attachment)).data
            if len(data) > most:
                raise AttachmentRefused(str(self.limits.refusal(attachment, len(data))))
            return data

        if attachment.mimetype != UNKNOWN_TYPE:
            return await store(self.workdir, message_id, attachment, download, self.limits)
        on_disk = self._on_disk(message_id, attachment)
        if on_disk is not None:  # a retake: typed by what was stored
            head = await asyncio.to_thread(_head, on_disk)
            typed = _typed(attachment, sniff(head), on_disk.name)
            return await store(self.workdir, message_id, typed, download, self.limits)
        fetched = await self._fetch(message_id, attachment)
        if len(fetched.data) > self.limits.max_bytes:
            raise AttachmentRefused(str(self.limits.refusal(attachment, len(fetched.data))))
        kind = fetched.mimetype if _specific(fetched.mimetype) else sniff(fetched.data[:SNIFF])
        typed = _typed(attachment, kind, _name(attachment, kind))

        async def fetched_data(_: int) -> bytes:
            return fetched.data

        return await store(self.workdir, message_id, typed, fetched_data, self.limits)

    def _on_disk(self, message_id: str, attachment: Attachment) -> Path | None:
        folder = self.workdir / folder_of(message_id)
        if attachment.kind != "image":
            found = folder / stored_name(attachment.name)
            return found if found.is_file() else None
        stem = stored_name(attachment.key)
        return next((p for p in sorted(folder.glob(f"{stem}.*")) if p.is_file()), None)

    async def _fetch(self, message_id: str, attachment: Attachment) -> Fetched:
        request = (
            GetMessageResourceRequest.builder()
            .message_id(message_id)
            .file_key(attachment.key)
            .type(attachment.source.get("type", "file"))
            .build()
        )
        try:
            response = await asyncio.to_thread(
                lambda: self.client.im.v1.message_resource.get(request)
            )
        except Exception as exc:  # requests' errors, a refused token fetch
            raise DownloadFailed(type(exc).__name__) from exc
        if not response.success() or response.file is None:
            raise DownloadFailed(f"code {response.code}: {response.msg}")
        headers = response.raw.headers if response.raw is not None else {}
        said = str(headers.get("Content-Type") or headers.get("content-type") or "")
        return Fetched(response.file.read(), said.split(";", maxsplit=1)[0].strip().lower())


def sniff(head: bytes) -> str:
    """The type of a file from its first bytes: a known image (or PDF), text, or unknown."""
    image = image_type(head)
    if image is not None:
        return image
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if b"\x00" in head:
        return UNKNOWN_TYPE
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not a character cut at the end of what was read
            return UNKNOWN_TYPE
    return "text/plain"


def _specific(mimetype: str) -> bool:
    return bool(mimetype) and mimetype not in (UNKNOWN_TYPE, "application/json")


def _name(attachment: Attachment, kind: str) -> str:
    if attachment.kind != "image":
        return attachment.name
    extension = _EXTENSIONS.get(kind) or mimetypes.guess_extension(kind) or ""
    return f"{stored_name(attachment.key)}{extension}"


def _typed(attachment: Attachment, mimetype: str, name: str) -> Attachment:
    return attachment.model_copy(update={"mimetype": mimetype, "name": name})


def _head(path: Path) -> bytes:
    with path.open("rb") as file:
        return file.read(SNIFF)
