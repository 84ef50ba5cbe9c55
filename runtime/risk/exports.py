"""What may leave the work dir as a file posted to a conversation (the send_file tool): an
export to everyone there, past the redaction every other text a person sees goes through.
A secret file is never posted; a text file whose content redaction would mask (a token, a
key, a password) asks first; so does a binary file other than an image, whose content
nothing here can check (an archive of a secret file is a secret file), and a file clawgate
keeps under `.clawgate/` (the work dir is shared: an attachment or a tool's output there may
be another conversation's)."""

from __future__ import annotations

from pathlib import Path

from runtime.file_types import image_type
from runtime.redact import redact_text

SCAN_BYTES = 64 * 1024 * 1024  # read at most this much of a file to judge it
KEPT = ".clawgate"  # where clawgate keeps attachments and outputs in the work dir


def is_image(data: bytes) -> bool:
    """PNG, JPEG, GIF or WebP, by its first bytes."""
    return image_type(data) is not None


def content_risk(data: bytes) -> str | None:
    """Why posting `data` as a file needs a human first, or None when it may go unasked. An
    image's bytes are scanned too (as Latin-1): an image header is six ASCII characters
    (`GIF89a`) anyone can put before a token. Not a guarantee: an encoded secret (base64)
    passes, as it would in an answer."""
    image = is_image(data)
    text = data.decode("latin-1") if image else data.decode("utf-8", errors="replace")
    if redact_text(text) != text:
        return "its content holds what looks like a secret (a token, key or password)"
    if not image and b"\x00" in data:
        return "a binary file (not an image), whose content cannot be checked for secrets"
    return None


def file_risk(path: str, workdir: Path) -> str | None:
    """`content_risk` of the work-dir file `path` as it is now (the tool checks again when it
    reads it); None when it cannot be read here (the tool then says why it cannot post it).
    Blocking: judge in a thread."""
    try:
        root = workdir.resolve()
        target = (workdir / path).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return None
        if redact_text(path) != path:  # its name is shown to everyone in the conversation
            return "its name looks like a secret (a token, key or password)"
        if target.relative_to(root).parts[0] == KEPT:
            return (
                "a file clawgate keeps for conversations (an attachment, a tool's whole "
                "output), which may come from another conversation"
            )
        with open(target, "rb") as file:
            data = file.read(SCAN_BYTES)
    except (OSError, ValueError, RuntimeError):
        return None
    return content_risk(data)
