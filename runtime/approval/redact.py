"""What of a tool call's arguments may be shown in chat: secrets masked, length capped."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from runtime.canonical import canonical_json
from runtime.tools.base import one_line

MASK = "[redacted]"
_SECRET_KEY = re.compile(r"(?i)(secret|token|passw(or)?d|api[_-]?key|credential|auth)")
_SECRET_VALUES = [
    re.compile(r"xox[abposr]-[\w-]+"),  # Slack tokens
    re.compile(r"xapp-[\w-]+"),
    re.compile(r"sk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys
    re.compile(r"AKIA[0-9A-Z]{16}"),  # AWS access key ids
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"(?i)bearer\s+[\w.~+/-]+=*"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
]
_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]*(secret|token|passw(or)?d|pass|pwd|api[_-]?key)[\w.-]*)\s*([=:])\s*"
    r"(\"[^\"]*\"|'[^']*'|\S+)"
)
# `--password x`, `-p x` after login-ish commands, `curl -u user:pass`, HTTP auth headers.
_FLAG_VALUES = [
    re.compile(r"(?i)(--?(?:password|passwd|pass|token|secret|api-key)[= ])(\S+)"),
    re.compile(r"(?i)(\blogin\b.*?\s-p\s+)(\S+)"),
    re.compile(r"(\s-u\s+[^:\s]+:)(\S+)"),
    re.compile(r"(?i)(authorization:\s*\w+\s+)([^\s\"']+)"),
]
_URL_CREDENTIALS = re.compile(r"(://[^/\s:@]*):[^@\s/]+@")  # also redis://:password@


def redact_text(text: str) -> str:
    for pattern in _SECRET_VALUES:
        text = pattern.sub(MASK, text)
    text = _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(4)}{MASK}", text)
    for pattern in _FLAG_VALUES:
        text = pattern.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return _URL_CREDENTIALS.sub(rf"\1:{MASK}@", text)


def redact(value: Any, key: str = "", scrub: Callable[[str], str] = redact_text) -> Any:
    """`value` with every item under a secret-sounding key masked and text `scrub`bed."""
    if key and _SECRET_KEY.search(key):
        return MASK
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: redact(v, str(k), scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, scrub=scrub) for v in value]
    return value


def argument_summary(arguments: Mapping[str, Any], limit: int = 300) -> str:
    """One line for an approval notice: `command` alone for bash, else compact JSON."""
    clean = redact(dict(arguments))
    if set(clean) <= {"command", "timeout"} and isinstance(clean.get("command"), str):
        return one_line(clean["command"], limit)
    return one_line(canonical_json(clean), limit)
