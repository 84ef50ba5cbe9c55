"""What a file is by its first bytes, where its name says nothing or cannot be trusted: the
images a chat shows inline and a model takes (PNG, JPEG, GIF, WebP)."""

from __future__ import annotations

_IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(head: bytes) -> str | None:
    """The MIME type of the image `head` starts, or None."""
    for magic, kind in _IMAGES:
        if head.startswith(magic):
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None
