"""The audit chain's cost per entry for `clawgate bench runtime`: one typical entry appended as a
unit of its own, chained (runtime/audit_chain.py: seal, one EVALSHA) against the plain pipelined
`XADD MAXLEN ~` it replaces, on the Redis the bench uses, under a throwaway key prefix."""

from __future__ import annotations

import time
from typing import Any

from redis.asyncio import Redis

from bot.bench.runtime import _figures, _shown, _time_each
from bot.settings import Settings
from runtime.audit import AuditLog
from runtime.store.connection import connect
from runtime.store.keys import Keys


def _typical(audit: AuditLog, i: int) -> dict[str, str]:
    """A `tool_executed` entry as a run records one."""
    return audit.entry(
        "tool_executed",
        "slack:U0ALICE",
        tool="bash",
        call=f"call_{i}",
        status="completed",
        duration_ms=12,
        session="slack:T1:C1:1700000000.000100",
        conversation="slack:T1:C1",
        args_sha256="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        arg_keys="command",
        trace="4bf92f3577b34da6a3ce929d0e0e4736",
    )


async def _plain(redis: Redis, key: str, entry: dict[str, str], maxlen: int) -> None:
    """What AuditLog.record_many did before the chain."""
    pipe = redis.pipeline(transaction=False)
    pipe.xadd(key, entry, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]
    await pipe.execute()


async def bench_audit_append(settings: Settings, entries: int) -> dict[str, Any]:
    """p50/p99 of one entry appended plain and chained (microseconds), and the difference."""
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    keys = Keys(f"{settings.redis_prefix}-bench-audit-{time.time_ns()}")
    audit = AuditLog(redis, keys, settings.audit_maxlen, settings.audit_chain())
    plain_key = keys.audit() + "-plain"
    counter = iter(range(10 * entries + 1000))
    try:
        warmup = max(50, entries // 10)

        async def plain() -> None:
            await _plain(redis, plain_key, _typical(audit, next(counter)), settings.audit_maxlen)

        async def chained() -> None:
            await audit.record_many([_typical(audit, next(counter))])

        await _time_each(warmup, plain)
        await _time_each(warmup, chained)
        plain_samples = await _time_each(entries, plain)
        chained_samples = await _time_each(entries, chained)
    finally:
        made = [keys.audit(), keys.audit_head(), keys.audit_session_heads()]
        await redis.delete(*made, keys.audit_session_last())  # one slot (runtime/store/keys.py)
        await redis.delete(plain_key)
        await redis.aclose()
    plain_figures, chained_figures = _figures(plain_samples), _figures(chained_samples)
    return {
        "plain_xadd": plain_figures,
        "chained": chained_figures,
        "cost_p50_us": round(chained_figures["p50_us"] - plain_figures["p50_us"], 1),
        "keyed": settings.evidence_keys().keyed,
    }


def audit_lines(figures: dict[str, Any]) -> list[str]:
    how = "keyed" if figures["keyed"] else "unkeyed"
    return [
        _shown("audit entry, plain XADD (before the chain)", figures["plain_xadd"]),
        _shown(f"audit entry, chained ({how}, one EVALSHA)", figures["chained"]),
        f"audit chain cost per entry: p50 {figures['cost_p50_us']:.1f} us",
    ]
