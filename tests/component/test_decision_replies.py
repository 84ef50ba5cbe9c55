"""What whoever types a decision is told (adapters/dispatch.py): that it took, at once,
before the approved call runs; a grant's or an edit's own message at the end."""

from __future__ import annotations

from pathlib import Path

import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from runtime.providers.demo import DemoProvider
from tests.support import ADMIN, ALICE, HERE, make_runtime


async def test_whoever_types_a_decision_is_told_it_took_before_the_call_runs(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    (workdir / "notes.txt").write_text("x")
    asked = await runtime.run("s1", "run: rm -f notes.txt", ALICE, HERE)
    rejected = await runtime.run("s2", "run: rm -f notes.txt", ALICE, HERE)
    assert asked.approval_id is not None and rejected.approval_id is not None
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)
        # Told at once: nothing ran yet when the decider hears of it.
        assert (workdir / "notes.txt").exists() or "Rejected" in text

    await dispatch(runtime, "s1", f"/approve {asked.approval_id}", ADMIN, HERE, say)
    await dispatch(runtime, "s2", f"/reject {rejected.approval_id} not now", ADMIN, HERE, say)
    assert said == [
        f"Approved bash ({asked.approval_id}).",
        f"Rejected bash ({rejected.approval_id}).",
    ]
    assert not (workdir / "notes.txt").exists()  # and then it ran
