"""The console's sign-in store against a real Redis (runtime/web_access.py): a link signs in
once even when two requests race for it, its secret is compared in constant time and never
stored, sessions end by idling, by their absolute expiry and by revocation, and the index
`clawgate console sessions` reads forgets the sessions that ended by themselves."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from runtime.models import Actor
from runtime.store.keys import Keys
from runtime.web_access import ATTEMPTS_PER_MINUTE, IDLE_TTL_S, WebAccess

CAROL = Actor(platform="slack", user_id="U_CAROL")
DAVE = Actor(platform="slack", user_id="U_DAVE")


@pytest.fixture
def access(redis: Redis) -> WebAccess:
    return WebAccess(redis, Keys("cgtest"), "https://console.example/")


def token_of(link: str) -> str:
    assert link.startswith("https://console.example/console/login?token=")
    return link.partition("token=")[2]


async def test_two_racing_redeems_of_one_link_sign_in_once(access: WebAccess) -> None:
    token = token_of(await access.link(CAROL))
    won = await asyncio.gather(*(access.redeem(token) for _ in range(20)))
    assert [actor for actor in won if actor is not None] == [CAROL]


async def test_the_secret_is_compared_in_constant_time_and_never_stored(
    access: WebAccess, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[int] = []
    real: Callable[[bytes | str, bytes | str], bool] = hmac.compare_digest

    def spy(a: bytes | str, b: bytes | str) -> bool:
        compared.append(len(a))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)  # the module runtime.web_access uses
    token = token_of(await access.link(CAROL))
    link_id, _, secret = token.partition(".")
    stored = await redis.get(Keys("cgtest").console_link(link_id))
    assert stored is not None and secret not in stored
    assert await access.redeem(f"{link_id}.{secret[:-1]}x") is None
    assert compared == [64]  # the two hashes, whatever the secret's length
    assert await access.redeem(token) is None  # a wrong secret burnt it


async def test_malformed_tokens_and_cookies_sign_no_one_in(access: WebAccess) -> None:
    token = token_of(await access.link(CAROL))
    link_id, _, secret = token.partition(".")
    for bad in ("", link_id, f"{link_id}.", f"../{link_id}.{secret}", f"{'a' * 33}.{secret}"):
        assert await access.redeem(bad) is None
    assert await access.redeem(token) == CAROL  # none of them touched the link
    assert await access.session("x" * 129) is None
    assert await access.session("") is None


async def test_failed_sign_ins_are_limited_per_client(access: WebAccess) -> None:
    allowed = []
    for _ in range(ATTEMPTS_PER_MINUTE + 1):
        allowed.append(await access.may_try("10.0.0.1"))
        await access.tally("10.0.0.1", "failed")
    assert allowed == [True] * ATTEMPTS_PER_MINUTE + [False]
    assert await access.may_try("10.0.0.2")
    assert [await access.tally("10.0.0.2", "anon") for _ in range(3)] == [1, 2, 3]


async def test_a_session_renews_its_idle_expiry_on_use_but_not_by_being_watched(
    access: WebAccess, redis: Redis
) -> None:
    cookie, session = await access.open_session(CAROL, "10.0.0.1")
    key = Keys("cgtest").console_session(session.id)
    await redis.expire(key, 5)
    assert await access.alive(session)
    assert await redis.ttl(key) <= 5  # watching does not renew it
    assert await access.session(cookie) is not None
    assert await redis.ttl(key) > IDLE_TTL_S - 5  # using it does

    await redis.delete(key)  # an hour unused
    assert await access.session(cookie) is None
    assert not await access.alive(session)


async def test_a_session_ends_at_its_absolute_expiry_however_used(
    access: WebAccess, redis: Redis
) -> None:
    cookie, session = await access.open_session(CAROL, "10.0.0.1")
    key = Keys("cgtest").console_session(session.id)
    await redis.set(key, session.model_copy(update={"expires_at": 1}).model_dump_json(), ex=60)
    assert await access.session(cookie) is None
    assert await redis.exists(key) == 0
    assert await access.sessions() == []


async def test_the_sessions_index_forgets_sessions_that_ended_by_themselves(
    access: WebAccess, redis: Redis
) -> None:
    keys = Keys("cgtest")
    _, idle = await access.open_session(CAROL, "10.0.0.1")
    _, live = await access.open_session(DAVE, "10.0.0.2")
    await redis.zadd(keys.console_sessions(), {"long-gone": 1})  # past its absolute expiry
    await redis.delete(keys.console_session(idle.id))  # ended by idling

    assert [s.id for s in await access.sessions()] == [live.id]
    assert await redis.zrange(keys.console_sessions(), 0, -1) == [live.id]


async def test_revoking_by_id_needs_six_characters_and_by_person_ends_all_theirs(
    access: WebAccess,
) -> None:
    carol_cookie, carol = await access.open_session(CAROL, "10.0.0.1")
    dave_cookies = [(await access.open_session(DAVE, "10.0.0.2"))[0] for _ in range(2)]

    assert await access.revoke(carol.id[:5]) == []
    assert await access.revoke("") == []
    assert await access.session(carol_cookie) is not None
    assert [s.id for s in await access.revoke(carol.id[:6].upper())] == [carol.id]
    assert await access.session(carol_cookie) is None

    assert len(await access.revoke(DAVE.key)) == 2
    assert [await access.session(cookie) for cookie in dave_cookies] == [None, None]
    assert await access.sessions() == []
