"""The audit trail's hash chain on a real Redis (a cluster under TEST_REDIS_CLUSTER=1): what
each entry carries, concurrent writers making one chain, key rotation, checkpoints, and
`clawgate audit verify` naming each kind of tampering with exit 1 (exit 0 untouched)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import redis as syncredis
import redis.asyncio as aioredis

from bot.cli import main
from runtime.audit import AuditLog
from runtime.audit_chain import ChainConfig, entry_message, head_message
from runtime.audit_verify import Scope, page_check, read_checkpoints, verify
from runtime.evidence_keys import KeyRing, load
from runtime.store.keys import Keys
from runtime.store.streams import Entry, entries
from tests.conftest import client_for, sync_client_for
from tests.support import PREFIX

KEYS = Keys(PREFIX)
STREAM = KEYS.audit()
K1 = "k1:first-secret-0123456789"
K2 = "k2:second-secret-012345678"
RING = load(K1)
Tamper = Callable[[syncredis.Redis], None]


def audit_log(
    redis: aioredis.Redis,
    ring: KeyRing = RING,
    every: int = 1000,
    file: Path | None = None,
    maxlen: int = 100_000,
) -> AuditLog:
    return AuditLog(redis, KEYS, maxlen, ChainConfig(ring, every, file))


async def fill(audit: AuditLog, count: int, session: str | None = None) -> None:
    entries = [audit.entry("tick", "tester", n=i, session=session) for i in range(count)]
    await audit.record_many(entries)


def raw(client: syncredis.Redis) -> list[Entry]:
    return entries(client.xrange(STREAM))


async def stream(
    redis: aioredis.Redis, count: int | None = None, newest: bool = False
) -> list[Entry]:
    """The stream's entries, oldest first (`newest`: the newest `count`, newest first)."""
    if newest:
        return entries(await redis.xrevrange(STREAM, count=count))
    return entries(await redis.xrange(STREAM, count=count))


async def hash_of(redis: aioredis.Redis, key: str) -> dict[str, str]:
    return cast(dict[str, str], await redis.hgetall(key))


# --- what is written ----------------------------------------------------------------------


async def test_entries_are_chained_and_read_back_without_chain_fields(
    redis: aioredis.Redis,
) -> None:
    audit = audit_log(redis)
    await audit.record("command", "slack:U1", name="help", session="s1")
    await audit.record("policy_changed", "slack:U1", tool="bash")
    await audit.record("command", "slack:U1", name="status", session="s1")
    stored = [f for _, f in await stream(redis)]
    assert [f["seq"] for f in stored] == ["1", "2", "3"]
    assert [f["prev"] for f in stored] == ["", stored[0]["mac"], stored[1]["mac"]]
    assert {f["kid"] for f in stored} == {"k1"}
    assert [(f.get("sseq"), f.get("sprev")) for f in stored] == [
        ("1", ""),
        (None, None),
        ("2", stored[0]["mac"]),
    ]
    assert all(RING.check(entry_message(STREAM, f), f["mac"], "k1") for f in stored)
    head = await hash_of(redis, KEYS.audit_head())
    assert head["seq"] == "3" and head["mac"] == stored[2]["mac"]
    assert RING.check(head_message(STREAM, 3, head["mac"]), head["hmac"], "k1")
    newest = (await audit.newest(1))[0]
    assert newest.fields == {"name": "status", "session": "s1"}
    assert newest.chain["seq"] == "3" and newest.stored() == stored[2]


async def test_concurrent_writers_make_one_intact_chain(redis: aioredis.Redis) -> None:
    """8 tasks on each of 2 logs (as 2 processes), 25 entries each, some in sessions."""
    logs = [audit_log(redis, every=100), audit_log(redis, every=100)]

    async def writer(process: int, task: int) -> None:
        for i in range(25):
            session = f"s{(task + i) % 3}" if i % 2 else None
            await logs[process].record("tick", f"w{process}.{task}", n=i, session=session)

    await asyncio.gather(*(writer(p, t) for p in range(2) for t in range(8)))
    stored = [f for _, f in await stream(redis)]
    ticks = [f for f in stored if f["event"] == "tick"]
    assert len(ticks) == 400  # none lost
    assert len({(f["actor"], f["n"]) for f in ticks}) == 400
    assert [int(f["seq"]) for f in stored] == list(range(1, len(stored) + 1))
    assert sum(f["event"] == "audit_checkpoint" for f in stored) == 4  # at 100, 200, 300, 400
    report = await verify(redis, KEYS, RING, 100_000)
    assert report.ok and report.entries == len(stored), report.broken
    for session in ("s0", "s1", "s2"):
        mine = await verify(redis, KEYS, RING, 100_000, Scope(session=session))
        assert mine.ok and mine.entries == sum(f.get("session") == session for f in stored)


async def test_a_rotated_key_keeps_old_entries_verifiable(redis: aioredis.Redis) -> None:
    await fill(audit_log(redis), 5)
    rotated = load(f"{K1},{K2}")
    await fill(audit_log(redis, rotated), 5)
    report = await verify(redis, KEYS, rotated, 100_000)
    assert report.ok and report.entries == 10 and report.key_ids == ["k1", "k2"]
    lacking = await verify(redis, KEYS, load(K2), 100_000)
    assert lacking.broken is not None and lacking.broken.kind == "unknown_key"
    assert lacking.broken.seq == 1


async def test_a_process_without_the_key_breaks_a_keyed_chain_and_says_so(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await fill(audit_log(redis), 3)
    with caplog.at_level(logging.WARNING, logger="runtime.audit_chain"):
        await fill(audit_log(redis, KeyRing()), 2)  # CLAWGATE_AUDIT_KEY missing here
    assert "unkeyed audit entries follow keyed ones" in caplog.text
    report = await verify(redis, KEYS, RING, 100_000)
    assert report.broken is not None and report.broken.kind == "unkeyed_after_keyed"
    assert report.broken.seq == 4


async def test_entries_before_the_chain_and_trimmed_ones_are_no_break(
    redis: aioredis.Redis,
) -> None:
    for i in range(3):
        await redis.xadd(STREAM, {"event": "old", "actor": "", "trace": "", "at": str(i)})
    await fill(audit_log(redis), 10)
    report = await verify(redis, KEYS, RING, 100_000)
    assert report.ok and report.predate == 3 and report.entries == 10

    await redis.delete(STREAM, KEYS.audit_head())
    audit = audit_log(redis, maxlen=1000)
    for _ in range(15):
        await fill(audit, 100)
    assert 1000 <= await redis.xlen(STREAM) < 1500
    trimmed = await verify(redis, KEYS, RING, 1000)
    assert trimmed.ok and trimmed.trimmed > 0 and trimmed.last_seq == 1501  # one checkpoint


async def test_heads_of_sessions_trimmed_away_are_dropped(redis: aioredis.Redis) -> None:
    audit = audit_log(redis, every=10, maxlen=100)
    for i in range(50):
        await audit.record("tick", "tester", session=f"s{i}")
    assert await redis.hlen(KEYS.audit_session_heads()) == 50
    for _ in range(4):
        await fill(audit, 100)
    first = int((await stream(redis, 1))[0][1]["seq"])
    assert first > 60  # every session's entry is gone
    assert await redis.hlen(KEYS.audit_session_heads()) == 0
    assert await redis.zcard(KEYS.audit_session_last()) == 0
    await audit.record("tick", "tester", session="s0")  # a new sub-chain
    newest = [f for _, f in await stream(redis, 2, newest=True) if f.get("session")]
    assert [(f["sseq"], f["sprev"]) for f in newest] == [("1", "")]
    assert (await verify(redis, KEYS, RING, 100, Scope(session="s0"))).ok
    assert (await verify(redis, KEYS, RING, 100)).ok


async def test_a_lost_head_is_rebuilt_and_said(redis: aioredis.Redis) -> None:
    await fill(audit_log(redis), 4)
    await redis.delete(KEYS.audit_head())
    missing = await verify(redis, KEYS, RING, 100_000)
    assert missing.broken is not None and missing.broken.kind == "head_lost"
    await fill(audit_log(redis), 2)  # a fresh process: rebuilds it from the newest entry
    stored = [f for _, f in await stream(redis)]
    assert [f["event"] for f in stored] == ["tick"] * 4 + ["audit_head_rebuilt"] + ["tick"] * 2
    assert stored[4]["after"] == "4" and stored[4]["prev"] == stored[3]["mac"]
    report = await verify(redis, KEYS, RING, 100_000)
    assert report.broken is not None and report.broken.kind == "head_lost"
    assert report.broken.seq == 5


async def test_checkpoints_in_the_file_catch_a_head_rewound_to_an_old_value(
    redis: aioredis.Redis, tmp_path: Path
) -> None:
    kept = tmp_path / "checkpoints.jsonl"
    audit = audit_log(redis, every=10, file=kept)
    await fill(audit, 15)
    old_head = await hash_of(redis, KEYS.audit_head())  # an attacker copied it at seq 16
    await fill(audit, 10)
    lines = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [line["seq"] for line in lines] == [10, 20]
    stored = [f for _, f in await stream(redis)]
    assert stored[10]["event"] == "audit_checkpoint" and stored[10]["count"] == "10"
    checkpoints = read_checkpoints(kept)
    report = await verify(redis, KEYS, RING, 100_000, Scope(checkpoints=checkpoints))
    assert report.ok and report.checkpoints == 2
    # The newest entries deleted and the head set back to the value copied earlier: the chain
    # alone cannot tell (a documented limit), the checkpoint kept outside can.
    ids = [i for i, _ in await stream(redis)][16:]
    await redis.xdel(STREAM, *ids)
    await redis.hset(KEYS.audit_head(), mapping=old_head)  # type: ignore[arg-type]
    assert (await verify(redis, KEYS, RING, 100_000)).ok
    caught = await verify(redis, KEYS, RING, 100_000, Scope(checkpoints=checkpoints))
    assert caught.broken is not None and caught.broken.kind == "truncated_head"


def test_a_page_of_entries_says_whether_it_verifies() -> None:
    """The console's Audit page line: MACs and links among the entries shown."""
    fields: list[dict[str, str]] = []
    prev = ""
    for seq in range(1, 4):
        entry = {"event": "tick", "actor": "", "trace": "", "at": "1", "seq": str(seq)}
        entry.update(kid="k1", prev=prev)
        entry["mac"] = prev = RING.mac(entry_message(STREAM, entry))
        fields.append(entry)
    assert page_check(STREAM, RING, fields) == "Chain: the 3 chained entries shown verify (key k1)."
    fields[1]["actor"] = "someone else"
    assert page_check(STREAM, RING, fields).startswith("Chain: 1 of the 3 chained entries shown")
    assert page_check(STREAM, RING, [{"event": "old"}]) == ""


# --- clawgate audit verify -------------------------------------------------------------------


@pytest.fixture
def cli_env(cli_env: str, empty_redis: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """The CLI's settings (tests/component/conftest.py), keyed with k1, on an empty database."""
    monkeypatch.setenv("CLAWGATE_AUDIT_KEY", K1)
    return cli_env


def write(url: str, count: int, ring: KeyRing = RING) -> None:
    async def go() -> None:
        redis = client_for(url)
        try:
            await fill(audit_log(redis, ring), count, session=None)
            await fill(audit_log(redis, ring), 4, session="sx")
        finally:
            await redis.aclose()

    asyncio.run(go())


def rebuild(client: syncredis.Redis, entries: list[tuple[str, dict[str, str]]]) -> None:
    """The stream replaced by `entries` (ids kept): what someone with write access can do."""
    client.delete(STREAM)
    for entry_id, fields in entries:
        client.xadd(STREAM, fields, id=entry_id)  # type: ignore[arg-type]


def change(client: syncredis.Redis) -> None:
    entries = raw(client)
    entries[9][1]["n"] = "changed"
    rebuild(client, entries)


def delete(client: syncredis.Redis) -> None:
    client.xdel(STREAM, raw(client)[9][0])


def insert(client: syncredis.Redis) -> None:
    """A forged entry between the 10th and 11th, claiming the 11th's place."""
    entries = [fields for _, fields in raw(client)]
    forged = {**entries[9], "n": "forged", "seq": "11", "prev": entries[9]["mac"], "mac": "f" * 64}
    entries.insert(10, forged)
    rebuild(client, [(f"{1000 + i}-1", fields) for i, fields in enumerate(entries)])


def reorder(client: syncredis.Redis) -> None:
    entries = raw(client)
    (a, first), (b, second) = entries[9], entries[10]
    entries[9], entries[10] = (a, second), (b, first)
    rebuild(client, entries)


def truncate_head(client: syncredis.Redis) -> None:
    client.xdel(STREAM, *[i for i, _ in raw(client)[-3:]])


def truncate_start(client: syncredis.Redis) -> None:
    client.xtrim(STREAM, maxlen=10, approximate=False)


@pytest.mark.parametrize(
    ("tamper", "name"),
    [
        (change, "changed entry at seq 10"),
        (delete, "deleted entry at seq 11"),
        (insert, "inserted entry at seq 11"),
        (reorder, "reordered entries at seq 11"),
        (truncate_head, "truncated head at seq 34"),
        (truncate_start, "truncated start at seq 25"),
    ],
)
def test_verify_names_each_tampering(
    cli_env: str, capsys: pytest.CaptureFixture[str], tamper: Tamper, name: str
) -> None:
    write(cli_env, 30)
    assert main(["audit", "verify"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Audit chain intact: 34 entries checked, seq 1 to 34, key ids k1.\n")
    assert "Written " in out and "Unkeyed" not in out
    client = sync_client_for(cli_env)
    try:
        tamper(client)
    finally:
        client.close()
    assert main(["audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"Audit chain BROKEN: {name}"), out


def test_verify_session_json_and_unkeyed_note(
    cli_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(cli_env, 6)
    assert main(["audit", "verify", "--session", "sx", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["entries"] == 4 and report["session"] == "sx"
    assert (report["first_seq"], report["last_seq"]) == (1, 4)  # the session's own seq
    client = sync_client_for(cli_env)
    try:
        client.xdel(STREAM, raw(client)[7][0])  # the session's 2nd entry
    finally:
        client.close()
    assert main(["audit", "verify", "--session", "sx"]) == 1
    assert capsys.readouterr().out.startswith(
        "session sx's sub-chain BROKEN: deleted entry at sseq 3"
    )
    client = sync_client_for(cli_env)
    try:
        client.flushdb()
        write(cli_env, 6)
        client.delete(KEYS.audit_session_heads())  # the next entry of sx starts again
        write(cli_env, 0)
    finally:
        client.close()
    assert main(["audit", "verify", "--session", "sx"]) == 1
    assert capsys.readouterr().out.startswith("session sx's sub-chain BROKEN: lost head at sseq 1")
    assert main(["audit", "verify", "--session", "nobody"]) == 0
    assert "no chained entries" in capsys.readouterr().out

    monkeypatch.delenv("CLAWGATE_AUDIT_KEY")
    assert main(["audit", "verify", "--since", "1h"]) == 1  # k1 entries, no key here
    out = capsys.readouterr().out
    assert "unknown key id" in out and "Unkeyed chain (key id none)" in out
    assert main(["audit", "verify", "--since", "yesterday"]) == 2
    assert main(["audit", "verify", "--checkpoints", "/nonexistent/file"]) == 2


# Appends entries sealed by the test given as one JSON array of flat field lists: a few
# arguments per 5,000 entries instead of 125,000 (packing them is what makes filling slow).
FILL = """
for _, flat in ipairs(cjson.decode(ARGV[1])) do redis.call('XADD', KEYS[1], '*', unpack(flat)) end
"""
