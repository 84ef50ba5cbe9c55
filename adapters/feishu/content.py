"""What a Feishu message says, from its type and its content JSON (events and the history API
carry the same shapes): the words of text and rich-text (`post`) messages, with a post's
title, code blocks and Markdown kept; the images and files it carries, which the worker
downloads; and, for a kind clawgate does not read yet, what it is, so the sender is told."""

from __future__ import annotations

import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from adapters.feishu.payloads import FileContent, ImageContent, PostBody, PostElement, TextContent
from adapters.http import NotJson, json_object
from runtime.queue.inbound import Attachment

READS = "text, rich text (with its code blocks and images), images and files"
# Kinds a person can send that are not read yet, as the sender is told.
UNREAD = {
    "sticker": "a sticker",
    "audio": "a voice message",
    "merge_forward": "forwarded messages",
    "share_chat": "a shared group",
    "share_user": "a shared contact",
    "interactive": "a card",
    "location": "a location",
    "todo": "a task",
    "vote": "a poll",
    "share_calendar_event": "a calendar event",
    "calendar": "a calendar invitation",
    "general_calendar": "a calendar event",
    "video_chat": "a video call",
    "folder": "a folder",
    "system": "a system message",
    "hongbao": "a red packet",
}
UNKNOWN_TYPE = "application/octet-stream"


@dataclass(frozen=True, slots=True)
class Content:
    """`text` as the model reads it (mention keys such as `@_user_1` left for the caller);
    `attachments` in the order they appear; `unread`: the kind, when it is not read."""

    text: str
    attachments: tuple[Attachment, ...] = ()
    unread: str | None = None


def read_content(message_type: str, content: str) -> Content | None:
    """None for content that is not what Feishu sends for its type."""
    if message_type in UNREAD or message_type not in _READERS:
        return Content("", unread=UNREAD.get(message_type, f"a message of type {message_type}"))
    try:
        return _READERS[message_type](json_object(content))
    except (NotJson, ValidationError):
        return None


def _text(parsed: dict[str, object]) -> Content:
    return Content(TextContent.model_validate(parsed).text)


def _image(parsed: dict[str, object]) -> Content:
    return Content("", (image(ImageContent.model_validate(parsed).image_key),))


def _file(parsed: dict[str, object]) -> Content:
    file = FileContent.model_validate(parsed)
    return Content("", (_attached(file.file_key, file.file_name, "file"),))


def _media(parsed: dict[str, object]) -> Content:
    file = FileContent.model_validate(parsed)
    name = file.file_name or f"{file.file_key}.mp4"
    return Content("", (_attached(file.file_key, name, "media"),))


def _post(parsed: dict[str, object]) -> Content:
    # {"title", "content"}, or the same per language: {"zh_cn": {"title", "content"}}
    body: object = parsed if "content" in parsed else next(iter(parsed.values()), {})
    post = PostBody.model_validate(body)
    lines = [post.title.strip()] if post.title.strip() else []
    found: list[Attachment] = []
    for paragraph in post.content:
        lines.append(_paragraph(paragraph, found))
    return Content("\n".join(lines).strip(), tuple(found))


def _paragraph(elements: Iterable[PostElement], found: list[Attachment]) -> str:
    words: list[str] = []
    for element in elements:
        tag, text = element.tag, element.text or ""
        if tag in ("text", "md"):
            words.append(text)
        elif tag == "a":
            href = element.href or ""
            words.append(f"{text} ({href})" if href and href != text else text or href)
        elif tag == "at":
            words.append(_mention(element))
        elif tag == "code_block":  # a fenced block of its own, whatever surrounds it
            words.append(f"\n```{(element.language or '').lower()}\n{text.rstrip()}\n```\n")
        elif tag == "emotion" and element.emoji_type:
            words.append(f":{element.emoji_type.lower()}:")
        elif tag == "hr":
            words.append("\n---\n")
        elif tag == "img" and element.image_key:
            found.append(image(element.image_key))
        elif tag == "media" and element.file_key:
            found.append(_attached(element.file_key, f"{element.file_key}.mp4", "media"))
    return "".join(words).strip("\n")


def _mention(element: PostElement) -> str:
    """A mention key (events) stays for the caller to resolve, as in text messages."""
    who = element.user_id or ""
    if who.startswith("@_user_") or not element.user_name:
        return f" {who} "
    return f" @{element.user_name} "


def image(key: str) -> Attachment:
    """An image: its format is known once downloaded (the name gets its extension then)."""
    return Attachment(
        key=key, name=key, mimetype=UNKNOWN_TYPE, kind="image", source={"type": "image"}
    )


def _attached(key: str, name: str, kind: str) -> Attachment:
    mimetype = mimetypes.guess_type(name)[0] or UNKNOWN_TYPE
    return Attachment(
        key=key,
        name=name or key,
        mimetype=mimetype,
        kind="media" if kind == "media" else "file",
        source={"type": "file"},
    )


_READERS = {"text": _text, "post": _post, "image": _image, "file": _file, "media": _media}
