"""What an MCP tool call returned, as text: the content blocks in order (text as it is, other
media named, never inlined), else the structured content as JSON. Bounded like bash's output:
the executor then cuts it for the model and keeps it whole as the call's artifact (traces in
replay mode keep that), and the chat sees a redacted one-line display."""

from __future__ import annotations

import json
from typing import Any

MAX_OUTPUT_CHARS = 256_000  # kept of a result at all; the model sees at most its own cap


def _block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(str(getattr(block, "data", "")))
        return f"[{kind} {getattr(block, 'mime_type', '')}, {size} base64 characters]"
    if kind == "resource_link":
        return f"[resource link {block.uri}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource {resource.uri} (binary)]"
    return f"[{kind or 'unknown'} content]"


def result_text(result: Any) -> tuple[str, bool]:
    """(the text of a `CallToolResult`, whether the server said the call failed)."""
    parts = [_block(block) for block in result.content or []]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    text = "\n".join(parts)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n[result cut at {MAX_OUTPUT_CHARS} characters]"
    return text, bool(result.is_error)
