"""Tool names as an OpenAI-compatible API accepts them (`^[a-zA-Z0-9_-]{1,64}$`): an MCP
tool's `github.create_issue` is sent as `github__create_issue`, and the model's calls are
mapped back through the names offered in that request. Built-in names pass unchanged."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

_ACCEPTED = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OTHER = re.compile(r"[^a-zA-Z0-9_-]")
MAX_CHARS = 64


def wire_name(name: str) -> str:
    """The name sent for `name`: the same when accepted, else a stable accepted form."""
    if _ACCEPTED.match(name):
        return name
    wire = _OTHER.sub("_", name.replace(".", "__", 1))
    if len(wire) > MAX_CHARS or not wire:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        wire = f"{wire[: MAX_CHARS - 9]}_{digest}"
    return wire


def name_map(names: Iterable[str]) -> dict[str, str]:
    """wire name -> name, for the tools offered in one request."""
    return {wire_name(name): name for name in names}
