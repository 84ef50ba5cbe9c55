"""Canonical JSON: one byte-exact text per value, for duplicate detection and call hashes; and
the bounded forms of model-made names (tool names, argument keys) that traces and the audit
trail store."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


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
        return {"tool": name}
    return {"tool": UNKNOWN_TOOL, "tool_sha256": text_sha256(name), "tool_chars": len(name)}
