"""Grants: what "approve always" leaves behind, visible and revocable. A grant lets later
calls with the same signature (runtime/risk/signature.py) run without asking, where its scope
says (one thread, one conversation, everywhere) and until it expires; only when all their
risk reasons were approved with it (so `cp a b` approved never covers `cp .env /tmp/x`).

Each scope is one Redis hash, signature -> grant JSON. A grant's id is derived from its scope
and signature, so it is stable and needs no index; grants written by wave 1 (a JSON list of
reasons) read as grants without a granter or an expiry.

Who may revoke one is the same in the chat, the console and the CLI (`revoke_grant`): admins
where it applies, or whoever granted it; a revocation and a refused attempt are audited.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Literal, cast

from pydantic import BaseModel
from redis.asyncio import Redis

from runtime.audit import AuditLog
from runtime.store.keys import Keys

GrantScope = Literal["thread", "here", "everywhere"]
EVERYWHERE = "everywhere"
_DURATION = re.compile(r"^(\d+)\s*(m|min|h|d)$")
_UNIT_SECONDS = {"m": 60, "min": 60, "h": 3600, "d": 86_400}


@dataclass(frozen=True, slots=True)
class GrantTerms:
    """How far an "approve always" reaches: this thread, this conversation (`here`, the
    default) or everywhere (admins only), and for how long (None: until revoked)."""

    scope: GrantScope = "here"
    seconds: float | None = None


MAX_DURATION_S = 366 * 86_400  # a grant "for" longer than a year is one without an end


def parse_duration(text: str) -> float:
    """`30m`, `2h`, `7d` -> seconds (a year at most); ValueError otherwise."""
    match = _DURATION.match(text.strip().lower())
    if not match or int(match[1]) == 0:
        raise ValueError(f"expected a duration like 30m, 2h or 7d, got {text!r}")
    seconds = int(match[1]) * _UNIT_SECONDS[match[2]]
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{text!r} is longer than a year; leave the end out instead")
    return seconds


class Grant(BaseModel):
    scope: str  # a conversation id, "thread:<session>", or "everywhere"
    rule: str  # the signature, parts separated by \x1f
    reasons: list[str]
    by: str = ""
    at: int = 0  # ms since the epoch
    expires_at: int | None = None
    approval: str = ""
    conversation: str = ""  # where it was granted ("" in grants of before it was recorded)

    @property
    def id(self) -> str:
        digest = hashlib.sha256(f"{self.scope}\x1f{self.rule}".encode()).hexdigest()
        return "g" + digest[:9]

    @property
    def tool(self) -> str:
        return self.rule.split("\x1f", 1)[0]

    @property
    def shown(self) -> str:
        return self.rule.replace("\x1f", " ")

    @property
    def applies_in(self) -> str | None:
        """The conversation it applies in; None for everywhere (and for a thread's grant
        written before grants recorded their conversation)."""
        if self.scope == EVERYWHERE:
            return None
        if self.scope.startswith("thread:"):
            return self.conversation or None
        return self.scope

    def live(self, now_ms: int) -> bool:
        return self.expires_at is None or now_ms < self.expires_at

    def covers(self, reasons: set[str], now_ms: int) -> bool:
        return self.live(now_ms) and reasons <= set(self.reasons)


def thread_scope(session: str) -> str:
    return f"thread:{session}"


def scope_of(terms: GrantTerms, conversation_id: str, session: str) -> str:
    if terms.scope == "thread":
        return thread_scope(session)
    return EVERYWHERE if terms.scope == "everywhere" else conversation_id


def describe_grant(grant: Grant) -> str:
    """`Calls matching `rm build` are now allowed in this conversation, for 1 h`."""
    if grant.scope == EVERYWHERE:
        where = "everywhere"
    elif grant.scope.startswith("thread:"):
        where = "in this thread"
    else:
        where = "in this conversation"
    until = ""
    if grant.expires_at is not None:
        until = f", until {time.strftime('%H:%M UTC', time.gmtime(grant.expires_at / 1000))}"
    return f"Calls matching `{grant.shown}` are now allowed {where}{until}"


def _grant(scope: str, rule: str, raw: str) -> Grant:
    value = json.loads(raw)
    if isinstance(value, list):  # wave 1: the approved reasons only
        return Grant(scope=scope, rule=rule, reasons=value)
    return Grant.model_validate({**value, "scope": scope, "rule": rule})


def _now_ms() -> int:
    return int(time.time() * 1000)


class GrantStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def add(self, grant: Grant) -> None:
        value = grant.model_dump_json(exclude={"scope", "rule"})
        await self.redis.hset(self.keys.rules(grant.scope), grant.rule, value)

    async def covering(
        self, rule: str, reasons: set[str], conversation_id: str, session: str
    ) -> Grant | None:
        """The grant that lets a call with signature `rule` and these risk reasons run in
        this thread, if any (one round trip; checked on every call, so a revocation applies
        at once in every process)."""
        scopes = [thread_scope(session), conversation_id, EVERYWHERE]
        pipe = self.redis.pipeline(transaction=False)
        for scope in scopes:
            pipe.hget(self.keys.rules(scope), rule)
        now = _now_ms()
        for scope, raw in zip(scopes, await pipe.execute(), strict=True):
            if raw is not None and (grant := _grant(scope, rule, raw)).covers(reasons, now):
                return grant
        return None

    async def here(self, conversation_id: str, session: str) -> list[Grant]:
        """The live grants that apply in this thread, narrowest scope first."""
        scopes = [thread_scope(session), conversation_id, EVERYWHERE]
        pipe = self.redis.pipeline(transaction=False)
        for scope in scopes:
            pipe.hgetall(self.keys.rules(scope))
        found = [
            _grant(scope, rule, raw)
            for scope, rules in zip(scopes, await pipe.execute(), strict=True)
            for rule, raw in sorted(rules.items())
        ]
        now = _now_ms()
        return [g for g in found if g.live(now)]

    async def all(self) -> list[Grant]:
        """Every live grant, of every scope (a scan: for the operator CLI)."""
        prefix = self.keys.rules("")
        found: list[Grant] = []
        async for key in self.redis.scan_iter(match=f"{prefix}*", count=500):
            scope = str(key)[len(prefix) :]
            rules = cast(dict[str, str], await self.redis.hgetall(key))
            found += [_grant(scope, rule, raw) for rule, raw in sorted(rules.items())]
        now = _now_ms()
        return sorted((g for g in found if g.live(now)), key=lambda g: (g.scope, g.rule))

    async def revoke(self, grant: Grant) -> bool:
        """Remove `grant`; False when it was gone already."""
        return bool(await self.redis.hdel(self.keys.rules(grant.scope), grant.rule))


async def revoke_grant(
    store: GrantStore, audit: AuditLog, grant: Grant, actor: str, *, admin: bool
) -> str | None:
    """Revoke `grant` as `actor` (`admin`: an admin where it applies); None when it is gone
    (revoked now or already), else why not. A revocation and a refusal are audited."""
    where = {
        "grant": grant.id,
        "scope": grant.scope,
        "tool": grant.tool,
        "conversation": grant.applies_in,  # who oversees it sees this in the audit trail
    }
    if not admin and actor != grant.by:
        why = f"only admins where it applies or {grant.by or 'whoever granted it'} may revoke it"
        await audit.record("grant_revoke_refused", actor, why=why, **where)
        return why
    if await store.revoke(grant):
        await audit.record("grant_revoked", actor, **where)
    return None
