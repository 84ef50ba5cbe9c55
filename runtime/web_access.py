"""Who is signed in to the web console: one-time sign-in links bound to a chat identity, the
sessions they become, and the rate limit on trying links.

A link's token is `<id>.<secret>`: Redis keeps the link under its id with the secret's hash,
so neither a dump of Redis nor a timing difference gives a usable link away. Redeeming takes
the link out of Redis first (GETDEL: a link works once, even when two requests race) and
then compares the secret in constant time. A session's cookie is a random token; Redis keeps
the session under the cookie's hash, with an idle expiry renewed on use and an absolute one
that is not. Every session has its own CSRF token for the forms it posts."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from runtime.models import Actor
from runtime.store.keys import Keys

LINK_TTL_S = 600  # a sign-in link works for 10 minutes
IDLE_TTL_S = 3_600  # a session unused for an hour ends
ABSOLUTE_TTL_S = 12 * 3_600  # and every session ends 12 hours after sign-in
ATTEMPTS_PER_MINUTE = 10  # failed sign-in attempts per client address
SHORT_ID = 12  # characters of a session's id that `clawgate console sessions` shows


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _now_ms() -> int:
    return int(time.time() * 1000)


class SignInLink(BaseModel):
    """What Redis keeps of a link (never the secret itself)."""

    actor: Actor
    secret_sha256: str
    expires_at: int  # ms


class ConsoleSession(BaseModel):
    id: str  # the hash of the cookie; its first SHORT_ID characters name it to people
    actor: Actor
    csrf: str
    created_at: int  # ms
    expires_at: int  # ms: the absolute end, whatever the use
    client: str = ""  # the address it signed in from

    @property
    def short_id(self) -> str:
        return self.id[:SHORT_ID]


class WebAccess:
    def __init__(self, redis: Redis, keys: Keys, public_url: str) -> None:
        """`public_url`: where people reach `clawgate serve` (CLAWGATE_PUBLIC_URL)."""
        self.redis = redis
        self.keys = keys
        self.public_url = public_url.rstrip("/")

    async def link(self, actor: Actor) -> str:
        """A new one-time sign-in link for `actor`, valid LINK_TTL_S."""
        link_id, secret = secrets.token_hex(8), secrets.token_urlsafe(24)
        stored = SignInLink(
            actor=actor, secret_sha256=_digest(secret), expires_at=_now_ms() + LINK_TTL_S * 1000
        )
        key = self.keys.console_link(link_id)
        await self.redis.set(key, stored.model_dump_json(), ex=LINK_TTL_S)
        return f"{self.public_url}/console/login?token={link_id}.{secret}"

    async def redeem(self, token: str) -> Actor | None:
        """The identity a link was made for, once; None for a link that is unknown, used,
        expired or forged (a wrong secret burns the link: it was seen by someone else)."""
        link_id, _, secret = token.partition(".")
        if not link_id.isalnum() or len(link_id) > 32 or not secret:
            return None
        raw = await self.redis.getdel(self.keys.console_link(link_id))
        if raw is None:
            return None
        try:
            stored = SignInLink.model_validate_json(raw)
        except ValidationError:
            return None
        if not hmac.compare_digest(stored.secret_sha256, _digest(secret)):
            return None
        return stored.actor if stored.expires_at > _now_ms() else None

    async def tally(self, client: str, what: str) -> int:
        """Count one `what` (a failed sign-in, an anonymous post) of `client` this minute;
        returns the count so far."""
        key = self.keys.console_attempts(f"{what}:{_digest(client)[:16]}")
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 60, nx=True)
            count, _ = await pipe.execute()
        return int(count)

    async def may_try(self, client: str) -> bool:
        """Whether `client` may try a link: fewer than ATTEMPTS_PER_MINUTE failed this
        minute. Only failures count: behind a proxy everyone shares one address."""
        failed = await self.redis.get(self.keys.console_attempts(f"failed:{_digest(client)[:16]}"))
        return int(failed or 0) < ATTEMPTS_PER_MINUTE

    async def open_session(self, actor: Actor, client: str) -> tuple[str, ConsoleSession]:
        """A new session for `actor`: its cookie value (given to the browser only) and
        itself. Always new: a session id is never taken from a request (no fixation)."""
        cookie = secrets.token_urlsafe(32)
        now = _now_ms()
        session = ConsoleSession(
            id=_digest(cookie),
            actor=actor,
            csrf=secrets.token_urlsafe(24),
            created_at=now,
            expires_at=now + ABSOLUTE_TTL_S * 1000,
            client=client,
        )
        async with self.redis.pipeline(transaction=True) as pipe:
            key = self.keys.console_session(session.id)
            pipe.set(key, session.model_dump_json(), ex=IDLE_TTL_S)
            pipe.zadd(self.keys.console_sessions(), {session.id: session.expires_at})
            pipe.zremrangebyscore(self.keys.console_sessions(), 0, now)
            await pipe.execute()
        return cookie, session

    async def session(self, cookie: str, renew: bool = True) -> ConsoleSession | None:
        """The live session of a cookie, its idle expiry renewed (unless `renew` is false:
        a page refreshing itself is no use); None once it ended."""
        if not cookie or len(cookie) > 128:
            return None
        key = self.keys.console_session(_digest(cookie))
        raw = await self.redis.get(key)
        if raw is None:
            return None
        try:
            session = ConsoleSession.model_validate_json(raw)
        except ValidationError:
            return None
        left_ms = session.expires_at - _now_ms()
        if left_ms <= 0:
            await self.end(session.id)
            return None
        if renew:
            await self.redis.pexpire(key, min(IDLE_TTL_S * 1000, left_ms))
        return session

    async def alive(self, session: ConsoleSession) -> bool:
        """Whether `session` still lives (not ended, not expired), without renewing it."""
        if session.expires_at <= _now_ms():
            return False
        return bool(await self.redis.exists(self.keys.console_session(session.id)))

    async def sessions(self) -> list[ConsoleSession]:
        """Every live session, oldest first. Sessions that ended by idling leave the index
        here (their keys expired by themselves)."""
        index = self.keys.console_sessions()
        await self.redis.zremrangebyscore(index, 0, _now_ms())
        found, idled = [], []
        for session_id in await self.redis.zrange(index, 0, -1):
            sid = session_id.decode() if isinstance(session_id, bytes) else str(session_id)
            raw = await self.redis.get(self.keys.console_session(sid))
            if raw is None:
                idled.append(sid)
            else:
                found.append(ConsoleSession.model_validate_json(raw))
        if idled:
            await self.redis.zrem(index, *idled)
        return sorted(found, key=lambda s: s.created_at)

    async def end(self, session_id: str) -> bool:
        """End one session (sign-out, revocation); whether it was live."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.console_session(session_id))
            pipe.zrem(self.keys.console_sessions(), session_id)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def revoke(self, what: str) -> list[ConsoleSession]:
        """End the sessions named by a short id (6 characters at least), or every session of
        a person (`slack:U1`)."""
        ended = []
        for session in await self.sessions():
            named = len(what) >= 6 and session.id.startswith(what.lower())
            if (named or session.actor.key == what) and await self.end(session.id):
                ended.append(session)
        return ended
