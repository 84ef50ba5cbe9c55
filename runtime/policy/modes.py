"""Modes per conversation: how much a conversation's runs may do without a human.

From strictest to loosest: `plan` (the model is offered no tool with side effects: it reads,
explores and asks questions), `ask` (every call with side effects waits for a human, even one
the risk rules would let run), `auto` (the default: the risk rules decide) and `edits` (as
auto, and a write or edit the built-in rules ask about only as a project file, a lockfile or
a large deletion runs unasked). Admins set the loosest mode allowed per scope (`[modes] max`)
and the mode of a conversation nobody switched (`[modes] default`). Whatever the mode, denials
(the policy's and the risk rules') still deny, and admins' `ask` tools still ask.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from runtime.mcp.tool import McpTool
from runtime.tools.base import Tool

Mode = Literal["plan", "ask", "auto", "edits"]
MODES: tuple[Mode, ...] = get_args(Mode)  # strictest first
DEFAULT_MODE: Mode = "auto"
# Without a `[modes] max`, the loosest mode is today's default: `edits` lets more run unasked
# than clawgate did before modes, so it is an admin's decision.
DEFAULT_MAX: Mode = "auto"
MODE_WORDS: dict[Mode, str] = {
    "plan": "the model is offered no tool with side effects (it reads, explores, asks)",
    "ask": "every call with side effects asks a human first",
    "auto": "the risk rules decide what asks (the default)",
    "edits": "as auto, and writes/edits of project files in the work dir run unasked",
}
# Built-in tools that change nothing: a read, a read-only exploration, a question.
_READ_ONLY = frozenset({"read", "explore", "clarify"})


def strictness(mode: Mode) -> int:
    return MODES.index(mode)


def capped(mode: Mode, limit: Mode) -> Mode:
    """`mode`, or `limit` when `mode` is looser than it."""
    return mode if strictness(mode) <= strictness(limit) else limit


def has_side_effects(tool: Tool[Any]) -> bool:
    """Whether a call of `tool` may change something. MCP tools count as read-only only when
    an admin trusts their server's annotations and the server marks them read-only; any
    other tool not known to change nothing has side effects (a new tool is one until said)."""
    if isinstance(tool, McpTool):
        return not (tool.server.rules.trust_annotations and tool.listing.read_only is True)
    return tool.name not in _READ_ONLY


class ModeRules(BaseModel):
    """`[modes]` at one scope; each field comes from the most specific scope that sets it."""

    model_config = ConfigDict(extra="forbid")

    max: Mode | None = None  # the loosest mode anyone may switch to here
    default: Mode | None = None  # the mode of a conversation nobody switched

    @model_validator(mode="after")
    def _default_within_max(self) -> ModeRules:
        if self.max and self.default and strictness(self.default) > strictness(self.max):
            raise ValueError(
                f"default {self.default!r} is looser than max {self.max!r} "
                f"(from strictest: {', '.join(MODES)})"
            )
        return self
