"""What of a tool call's arguments may be shown in chat: secrets masked, length capped.

Every pattern here runs in time linear in the text (no unbounded `.*` between two parts that
must both match, no greedy run that a failed suffix backtracks over from every position), so
masking a long tool output cannot stall the event loop."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from runtime.canonical import canonical_json

MASK = "[redacted]"
_SECRET_KEY = re.compile(r"(?i)(secret|token|passw(or)?d|api[_-]?key|credential|auth)")
_SECRET_VALUES = [
    re.compile(r"xox[abposr]-[\w-]+"),  # Slack tokens
    re.compile(r"xapp-[\w-]+"),
    re.compile(r"sk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys
    re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret/restricted keys
    re.compile(r"AKIA[0-9A-Z]{16}"),  # AWS access key ids
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"glpat-[A-Za-z0-9_-]{20,}"),  # GitLab personal access tokens
    re.compile(r"AIza[0-9A-Za-z_-]{35}"),  # Google API keys
    re.compile(r"(?<![\w-])eyJ[\w-]{8,}\.[\w-]{8,}(?:\.[\w-]*)?"),  # JWTs (JSON header.payload)
    re.compile(r"(?i)bearer\s+[\w.~+/-]+=*"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
]
# A value masked already, a quoted value (JSON, shell) up to its closing quote on the same
# line, else one word.
_VALUE = r"(\[redacted\]|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|\S+)"
# `Authorization: <scheme> <value>` or `Authorization: <value>`, as a header, JSON or argument.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*)"
    r"(\[redacted\]|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
    r"|(?:(?:basic|bearer|digest|negotiate|ntlm|token|bot|apikey|key)\s+)?[^\s\"',;}\]]+)"
)
_KEYWORD = (
    r"(?:secret|token|passw(?:or)?d|pass|pwd|api[_-]?key|credential|authori[sz]ation|auth(?!or))"
)
# `key=value`, `key: value`, `"key": "value"` where the key names a secret. The key is a whole
# run of [\w.-] (it starts where no such character precedes it), and the lookahead checks it
# for a secret word once: linear, where `\b[\w.-]*secret[\w.-]*` retried every position.
_ASSIGNMENT = re.compile(rf"(?i)(?<![\w.-])(?=[\w.-]*?{_KEYWORD})([\w.-]+[\"']?\s*[=:]\s*){_VALUE}")
# `--password x`, `-p x` after login-ish commands, `curl -u user:pass`.
_FLAG_VALUES = [
    re.compile(r"(?i)(--?(?:password|passwd|pass|token|secret|api-key)[= ])(\S+)"),
    re.compile(r"(?i)(\blogin\b.{0,200}?\s-p\s+)(\S+)"),
    re.compile(r"(\s-u\s+[^:\s]+:)(\S+)"),
]
_URL_CREDENTIALS = re.compile(r"(://[^/\s:@]*):[^@\s/]+@")  # also redis://:password@


def _masked(value: str) -> str:
    """The mask, quoted the way `value` was, so JSON-ish text stays JSON-ish."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return f"{value[0]}{MASK}{value[0]}"
    return MASK


# Every pattern above needs one of these (lowercased) in the text: a few substring checks
# spare most texts (progress lines, reasons, log messages) a dozen substitutions.
_TRIGGERS = (
    "xox", "xapp-", "sk-", "k_live_", "k_test_", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "glpat-", "aiza", "eyj", "bearer", "-----begin", "secret", "token", "pass", "pwd", "api",
    "credential", "auth", "login", "-u", "://",
)  # fmt: skip


def _may_hold_secrets(text: str) -> bool:
    lowered = text.lower()
    return any(trigger in lowered for trigger in _TRIGGERS)


def redact_text(text: str) -> str:
    if not _may_hold_secrets(text):
        return text
    for pattern in _SECRET_VALUES:
        text = pattern.sub(MASK, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + _masked(m.group(2)), text)
    text = _ASSIGNMENT.sub(lambda m: m.group(1) + _masked(m.group(2)), text)
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


def one_line(text: str, limit: int = 100) -> str:
    """Whitespace folded to single spaces, cut to `limit` characters: for chat displays."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def shown_url(url: str) -> str:
    """A URL as it may be printed: a password in it (or in its query) masked."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        url = parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}").geturl()
    return redact_text(url)
