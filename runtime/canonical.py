"""Canonical JSON: one byte-exact text per value, for duplicate detection and call hashes; a
call's arguments as the runtime sees them (runtime-owned markers stripped); and
the bounded forms of model-made names (tool names, argument keys) that traces and the audit
trail store."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from runtime.models import ToolCall


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def text_sha256(text: str) -> str:
    """sha256 (hex) of `text` as UTF-8. Lone surrogates, which JSON from a model may carry,
    are hashed as they are (`surrogatepass`) instead of failing."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


MAX_KEYS = 20
KEY_CHARS = 64


def key_names(value: Mapping[Any, Any]) -> list[str]:
    """The sorted key names of a mapping the model made (tool arguments), bounded: at most
    `MAX_KEYS` names, each cut at `KEY_CHARS` characters."""
    return [name[:KEY_CHARS] for name in sorted(map(str, value))[:MAX_KEYS]]


UNKNOWN_TOOL = "(unknown)"


def tool_fields(name: str, known: bool) -> dict[str, str | int]:
    """How traces and the audit trail name a called tool: a registered tool by its name; a
    name the model made up as `(unknown)` with its hash and size (it may be any text)."""
    if known:
        # An MCP tool (`<server>.<tool>`, runtime.mcp) also names its server on its own.
        return {"tool": name, "server": name.split(".", 1)[0]} if "." in name else {"tool": name}
    return {"tool": UNKNOWN_TOOL, "tool_sha256": text_sha256(name), "tool_chars": len(name)}


# Argument names the runtime owns; a model may never set them (see strip_markers).
RUNTIME_MARKERS = frozenset({"approved", "approval_id"})


def strip_markers(arguments: dict[str, Any]) -> dict[str, Any]:
    """Drop runtime-owned markers: only the runtime may say a call was approved."""
    return {
        k: v for k, v in arguments.items() if k not in RUNTIME_MARKERS and not k.startswith("_")
    }


def canonical_arguments(call: ToolCall) -> str:
    """The call's arguments as the runtime sees them (markers stripped), in canonical JSON.
    Unparseable arguments keep their raw text: they never run anyway."""
    try:
        raw = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return call.arguments
    return canonical_json(strip_markers(raw) if isinstance(raw, dict) else raw)
