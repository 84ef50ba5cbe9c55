"""The offline demo model: deterministic, no network, a tiny grammar that drives the tools.

    read <path>                    -> read the file
    run: <command>                 -> bash
    write <path>: <text>           -> write <text> (plus a newline) to the file
    edit <path>: <old> => <new>    -> replace <old> by <new>
    call <tool> <json arguments>   -> any tool with raw JSON arguments

After the tools ran, the answer is their output. Anything else gets this grammar as a reply.
A message that joined the run while it worked (steering) is read the same way.
Asked for a summary of a conversation (runtime/context), it lists the user's latest requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from runtime.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    ToolStatus,
    UserMessage,
)
from runtime.providers.base import SUMMARY_PROMPT
from runtime.steer import SENT_MEANWHILE

GRAMMAR = (
    "I am the offline demo model. I understand:\n"
    "  read <path>\n"
    "  run: <command>\n"
    "  write <path>: <text>\n"
    "  edit <path>: <old> => <new>\n"
    "  call <tool> <json arguments>\n"
    "Set OPENAI_API_KEY or OPENAI_BASE_URL to talk to a real model."
)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^read\s+(?P<path>\S.*)$", re.S), "read"),
    (re.compile(r"^run:\s*(?P<command>\S.*)$", re.S), "bash"),
    (re.compile(r"^write\s+(?P<path>[^:\s]+)\s*:\s?(?P<content>.*)$", re.S), "write"),
    (re.compile(r"^edit\s+(?P<path>[^:\s]+)\s*:\s?(?P<old>.+?) => (?P<new>.*)$", re.S), "edit"),
    (re.compile(r"^call\s+(?P<tool>[\w.-]+)\s*(?P<json>.*)$", re.S), "call"),
]


def parse_request(text: str) -> tuple[str, str] | None:
    """(tool name, JSON arguments) for a demo command, or None when it is not one."""
    text = text.strip()
    for pattern, kind in _PATTERNS:
        match = pattern.match(text)
        if not match:
            continue
        g = match.groupdict()
        if kind == "read":
            return "read", json.dumps({"path": g["path"].strip()})
        if kind == "bash":
            return "bash", json.dumps({"command": g["command"].strip()})
        if kind == "write":
            return "write", json.dumps({"path": g["path"], "content": g["content"] + "\n"})
        if kind == "edit":
            return "edit", json.dumps(
                {"path": g["path"], "old_text": g["old"], "new_text": g["new"]}
            )
        return g["tool"], g["json"].strip() or "{}"
    return None


class DemoProvider:
    name = "demo"
    offline_demo = True

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage:
        last = messages[-1] if messages else None
        first = messages[0] if messages else None
        if isinstance(first, SystemMessage) and first.content == SUMMARY_PROMPT:
            return AssistantMessage(content=summarize(str(getattr(last, "content", "") or "")))
        if isinstance(last, ToolMessage):
            return AssistantMessage(content=_summarize_results(messages))
        if not isinstance(last, UserMessage):
            return AssistantMessage(content=GRAMMAR)
        request = parse_request(last.content.removeprefix(SENT_MEANWHILE))
        if request is None:
            return AssistantMessage(content=GRAMMAR)
        tool, arguments = request
        offered = [t.name for t in tools]
        if tool not in offered:
            enabled = ", ".join(offered) or "none"
            return AssistantMessage(
                content=f"The {tool!r} tool is not enabled here (enabled: {enabled})."
            )
        step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
        return AssistantMessage(
            tool_calls=[ToolCall(id=f"demo_{step}", name=tool, arguments=arguments)]
        )


_ASKED = re.compile(r"^\[(\d+)\] user(?: \([^)]*\))?: (.*)$", re.M)  # a request in the messages
_LISTED = re.compile(r"^- \[(\d+)\] (.*)$", re.M)  # one in the summary so far


def summarize(request: str) -> str:
    """The demo's summary of a summarizing request (runtime/context): the latest user requests
    of the summary so far and of the messages it was given, with their indices;
    deterministic."""
    asked = _LISTED.findall(request) + _ASKED.findall(request)
    if not asked:
        return "(demo summary) No user requests in the summarized messages."
    lines = [f"- [{index}] {text[:80]}" for index, text in asked[-8:]]
    more = f" ({len(asked) - 8} older not listed)" if len(asked) > 8 else ""
    return "(demo summary) The user asked, latest last" + more + ":\n" + "\n".join(lines)


def _summarize_results(messages: Sequence[Message]) -> str:
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.insert(0, message)
    parts = []
    for result in results:
        if result.status is ToolStatus.COMPLETED:
            parts.append(result.content.rstrip("\n"))
        else:
            parts.append(
                f"The {result.name} call did not complete ({result.status}): {result.content}"
            )
    return "\n".join(parts)
