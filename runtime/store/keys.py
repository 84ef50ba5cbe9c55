"""Redis key names. Every key of one session carries the session as its hash tag, so
multi-key Lua scripts over one session work on Redis Cluster."""

from __future__ import annotations

import re

_SESSION_ID = re.compile(r"^[^{}\s]{1,200}$")


def check_session_id(session: str) -> str:
    if not _SESSION_ID.match(session):
        raise ValueError(f"invalid session id {session!r}: 1-200 characters, no braces or spaces")
    return session


class Keys:
    def __init__(self, prefix: str = "clawgate") -> None:
        self.prefix = prefix

    def session(self, session: str, name: str) -> str:
        return f"{self.prefix}:{{{check_session_id(session)}}}:{name}"

    def history(self, session: str) -> str:
        return self.session(session, "history")
