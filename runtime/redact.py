"""What of a tool call's arguments, a tool's output or the model's answer may be shown to
people: secrets masked, characters that hide or reorder text shown escaped, length capped.

Every pattern here runs in time linear in the text (no unbounded `.*` between two parts that
must both match, no greedy run that a failed suffix backtracks over from every position), so
masking a long tool output cannot stall the event loop: a run that may fail starts only where
it cannot start one character earlier (a lookbehind), and flags are looked for only in the
stretch of line after their program's name."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from runtime.canonical import canonical_json

MASK = "[redacted]"
_SECRET_KEY = re.compile(r"(?i)(secret|token|passw(or)?d|api[_-]?key|credential|auth)")
_SECRET_VALUES = [
    re.compile(r"xox[abposre]-[\w-]+"),  # Slack tokens
    re.compile(r"xapp-[\w-]+"),
    re.compile(r"sk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys (Anthropic's sk-ant- too)
    re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret/restricted keys
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}"),  # AWS access key ids (ASIA: temporary)
    re.compile(r"github_pat_[A-Za-z0-9_]{22,}"),  # GitHub fine-grained personal access tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens: ghp_ gho_ ghu_ ghs_ ghr_
    re.compile(r"glpat-[\w.-]{20,}"),  # GitLab personal access tokens
    re.compile(r"\bnpm_[A-Za-z0-9]{36}"),  # npm access tokens
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face tokens
    re.compile(r"AIza[0-9A-Za-z_-]{35}"),  # Google API keys
    re.compile(r"(?<![\w-])eyJ[\w-]{8,}\.[\w-]{8,}(?:\.[\w-]*)?"),  # JWTs (JSON header.payload)
    re.compile(r"(?i)bearer\s+[\w.~+/-]+=*"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)"),
]
# A value masked already, a quoted value (JSON, shell) up to its closing quote on the same
# line (or to the end of a text still being written), else one word.
_VALUE = r"(\[redacted\]|\"(?:[^\"\\\n]|\\.)*(?:\"|$)|'(?:[^'\\\n]|\\.)*(?:'|$)|\S+)"
# `Authorization: <scheme> <value>` or `Authorization: <value>`, as a header, JSON or argument.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*)"
    r"(\[redacted\]|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
    r"|(?:(?:basic|bearer|digest|negotiate|ntlm|token|bot|apikey|key)\s+)?"
    r"(?:\[redacted\]|[^\s\"',;}\]]+))"  # a token masked already is masked whole
)
_KEYWORD = (
    r"(?:secret|token|passw(?:or)?d|pass|pwd|api[_-]?key|credential|authori[sz]ation|auth(?!or))"
)
# `key=value`, `key: value`, `"key": "value"` where the key names a secret. The key is a whole
# run of [\w.-] (it starts where no such character precedes it), and the lookahead checks it
# for a secret word once: linear, where `\b[\w.-]*secret[\w.-]*` retried every position.
_ASSIGNMENT = re.compile(rf"(?i)(?<![\w.-])(?=[\w.-]*?{_KEYWORD})([\w.-]+[\"']?\s*[=:]\s*){_VALUE}")
# A URL's query parameter whose name holds one of these (`?key=`, `&sig=`, `access_token=`,
# `X-Amz-Signature=`): its value up to the next parameter, so the rest of the URL stays.
_QUERY = re.compile(
    r"(?i)([?&](?=[\w.-]*?(?:key|sig|token|secret|passw(?:or)?d|pwd|auth|credential))"
    r"[\w.-]+=)([^&#\s\"'<>]+)"
)
# `--password x`, `--db-password=x`, `-storepass x`, `--token x`, `--api-key x` (not a value
# that is the next flag: `--no-password -h db`), `curl -u user:pass`, `--user user:pass`.
_FLAG_VALUES = [
    re.compile(
        r"(?i)((?<![\w-])--?[\w-]*?(?:pass(?:word|wd|phrase)?|token|secret|api[-_]?key)"
        rf"(?:=|[ \t]+))(?!-){_VALUE}"
    ),
    re.compile(rf"((?<!\S)(?:-u|--user)(?:=|\s+)[^:\s]+:){_VALUE}"),
]
# A URL's userinfo (`scheme://userinfo@host`, up to the authority's last `@`).
_URL_USERINFO = re.compile(r"(://)([^\s/?#\"'<>`]*)@")
# A user name that stays readable in a URL: no digit, no capital (`git`, `x-access-token`,
# `deploy`), which a random token hardly ever is. Anything else before the `@` is masked.
_PLAIN_USER = re.compile(r"[a-z][a-z._-]{0,31}")


def _userinfo(match: re.Match[str]) -> str:
    """`user:password@` keeps a plain user and masks the password; a user alone is kept only
    when plain (`https://TOKEN@github.com`, `https://TOKEN:x-oauth-basic@` are masked)."""
    user, colon, password = match.group(2).partition(":")
    if user and not _PLAIN_USER.fullmatch(user):
        user = MASK
    return f"{match.group(1)}{user}{colon}{MASK if password else ''}@"


# Flags whose value is a password for the program named before them on the same (logical)
# line: `sshpass -p pw`, `redis-cli -a pw`, `mysql -ppw` (attached: `mysql -p db` asks and
# `db` is a database), `mongosh -p pw`, `sqlcmd|ipmitool|zip -P pw`, `7z -ppw`,
# `ldapsearch -w pw`, `smbclient -U user%pw`, `docker login -p pw`, `openssl -k pw|pass:pw`.
# Not `ssh -p 22` or `psql -p 5432` (ports): those programs are not listed.
_FLAG = r"(?<![\w-])"
_PROGRAM_FLAGS: dict[str, re.Pattern[str]] = {
    "sshpass": re.compile(rf"({_FLAG}-p\s*){_VALUE}"),
    "rediscli": re.compile(rf"({_FLAG}-a\s*){_VALUE}"),
    "mysql": re.compile(rf"({_FLAG}-p){_VALUE}"),
    "mongo": re.compile(rf"({_FLAG}-p\s*){_VALUE}"),
    "capital": re.compile(rf"({_FLAG}-P\s*){_VALUE}"),
    "archive": re.compile(rf"({_FLAG}-p){_VALUE}"),
    "ldap": re.compile(rf"({_FLAG}-w\s*){_VALUE}"),
    "samba": re.compile(rf"({_FLAG}-U\s*[^\s%]*%){_VALUE}"),
    "login": re.compile(rf"({_FLAG}-p\s*){_VALUE}"),
    "openssl": re.compile(rf"({_FLAG}-k\s+|\bpass:){_VALUE}"),
}
_PROGRAM = re.compile(
    r"(?<![\w.-])(?:(?P<sshpass>sshpass)|(?P<rediscli>(?:redis|valkey|keydb)-cli)"
    r"|(?P<mysql>mysql\w*|mariadb[\w-]*)|(?P<mongo>mongo\w*)"
    r"|(?P<capital>sqlcmd|bcp|ipmitool|zip|unzip)|(?P<archive>7z[az]?|rar|unrar)"
    r"|(?P<ldap>ldap\w+)|(?P<samba>smbclient|rpcclient)|(?P<login>login)|(?P<openssl>openssl))"
    r"(?![\w.-])"
)
_LINE_END = re.compile(r"(?<!\\)\n")  # a shell line goes on after a backslash


def _program_flags(text: str) -> str:
    """The password flags of each listed program masked from its name to the end of its
    line (or to the next listed program's name): each character is looked at once."""
    found = list(_PROGRAM.finditer(text))
    if not found:
        return text
    pieces, done = [], 0
    for i, match in enumerate(found):
        limit = found[i + 1].start() if i + 1 < len(found) else len(text)
        line_end = _LINE_END.search(text, match.end(), limit)
        end = line_end.start() if line_end else limit
        flags = _PROGRAM_FLAGS[str(match.lastgroup)]
        pieces += [text[done : match.end()], flags.sub(_keep_flag, text[match.end() : end])]
        done = end
    return "".join([*pieces, text[done:]])


def _keep_flag(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MASK}"


def _masked(value: str) -> str:
    """The mask, quoted the way `value` was, so JSON-ish text stays JSON-ish."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return f"{value[0]}{MASK}{value[0]}"
    return MASK


# Every pattern above but the program flags needs one of these (lowercased) in the text: a
# few substring checks spare most texts (progress lines, reasons, log messages) a dozen
# substitutions.
_TRIGGERS = (
    "xox", "xapp-", "sk-", "k_live_", "k_test_", "akia", "asia", "github_pat_", "ghp_", "gho_",
    "ghu_", "ghs_", "ghr_", "glpat-", "npm_", "hf_", "aiza", "eyj", "bearer", "-----begin",
    "secret", "token", "pass", "pwd", "api", "key", "sig", "credential", "auth", "-u", "--user",
    "://",
)  # fmt: skip


def _may_hold_secrets(text: str) -> bool:
    lowered = text.lower()
    return any(trigger in lowered for trigger in _TRIGGERS)


def redact_text(text: str) -> str:
    if _may_hold_secrets(text):
        for pattern in _SECRET_VALUES:
            text = pattern.sub(MASK, text)
        text = _QUERY.sub(_keep_flag, text)
        text = _URL_USERINFO.sub(_userinfo, text)  # before `TOKEN:pw` looks like `key: value`
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + _masked(m.group(2)), text)
        text = _ASSIGNMENT.sub(lambda m: m.group(1) + _masked(m.group(2)), text)
        for pattern in _FLAG_VALUES:
            text = pattern.sub(lambda m: m.group(1) + _masked(m.group(2)), text)
    return _program_flags(text)


# Characters that hide, reorder or break text as shown: controls (but newline and tab), format
# characters (zero-width space/joiner, BOM, soft hyphen, tag characters), bidi embeddings,
# overrides, isolates and marks, line and paragraph separators, lone surrogates, invisible
# fillers and the variation-selector supplement (hidden data). Unicode 14's categories Cc,
# Cf, Zl and Zp, and those few more.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
    "\u08e2\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ud800-\udfff"
    "\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)


def _escaped(match: re.Match[str]) -> str:
    """`\\u202e`; beyond the BMP a surrogate pair, so escaped JSON stays valid JSON."""
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible(text: str) -> str:
    """`text` with every character that would hide or reorder what people read shown as a
    `\\uXXXX` escape (in JSON text, the same JSON: an edit form prefilled with it submits
    exactly the value it shows)."""
    return _INVISIBLE.sub(_escaped, text)


_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def controls_escaped(text: str) -> str:
    """`text` with its control characters (but newline and tab) escaped: prose for a
    terminal, where an escape sequence or a carriage return would rewrite what is shown."""
    return _CONTROLS.sub(_escaped, text)


def shown(text: str) -> str:
    """`text` as a notice, a progress line or an operator's screen may show it."""
    return visible(redact_text(text))


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
    """Hidden characters escaped (before folding: a line separator must not pass for a
    space), whitespace folded to single spaces, cut to `limit` characters: for chat displays."""
    line = " ".join(visible(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def shown_url(url: str) -> str:
    """A URL as it may be printed: a password in it (or in its query) masked."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        url = parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}").geturl()
    return redact_text(url)
