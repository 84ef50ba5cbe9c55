"""Short machine codes for why a tool call or a model call failed, as traces and the audit
trail record them (`error_code`), so that failures can be counted and told apart without
reading their text (which traces keep only in replay mode).

A closed set, from what the code already distinguishes:
- tool calls: `unknown_tool` (a name the model made up), `invalid_arguments` (not JSON, not
  an object, or not what the tool takes), `denied` (the policy or a human refused it),
  `cancelled`, `timeout`, `unreachable` (an MCP server that is down), `sandbox_failed` (the
  sandbox could not be set up for the command), `sandbox_blocked` (the sandbox refused a write
  or the network to a command that ran), `check_failed` (the policy check itself failed, so
  the call did not run), `tool_failed` (the tool reported a failure), `tool_crashed` (it
  raised something unexpected);
- model calls: `timeout`, `unreachable`, `rate_limited`, `provider_error:<HTTP status>`,
  `provider_error` (no status), `malformed_answer`, `stream_broken`, `answer_cut_off` (tool
  calls in an answer the token limit or a content filter stopped: not run),
  `model_unavailable`, `cancelled`, `internal_error` (anything else).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from runtime.models import ToolResult, ToolStatus

ToolErrorCode = Literal[
    "unknown_tool",
    "invalid_arguments",
    "denied",
    "cancelled",
    "timeout",
    "unreachable",
    "sandbox_failed",
    "sandbox_blocked",
    "check_failed",
    "tool_failed",
    "tool_crashed",
]
# What a result's status alone says, where the code that made it said nothing finer.
_BY_STATUS: dict[ToolStatus, ToolErrorCode] = {
    ToolStatus.DENIED: "denied",
    ToolStatus.CANCELLED: "cancelled",
    ToolStatus.ERROR: "tool_failed",
}


def tool_error_code(result: ToolResult) -> str | None:
    """The result's code: the one it was given, else its status's; None for a call that
    completed (or waits for approval) without a failure noted."""
    return result.error_code or _BY_STATUS.get(result.status)


def model_error_code(exc: BaseException) -> str:
    """The code of a failed model request: the provider's (runtime/providers/base.py's
    `ProviderError.code`), else what kind of failure it was."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code else "internal_error"
