"""A tool result too long for the model is kept whole in the work dir, redacted, and the model
can read the rest with `read` offset/limit: the real runtime, the real `openai` client against
FakeOpenAI (whose recorded requests show what the model was told), history in a real Redis."""

from __future__ import annotations

from pathlib import Path

import redis.asyncio as aioredis

from runtime.models import StopReason
from runtime.outputs import output_path
from runtime.providers.openai_provider import OpenAIProvider
from tests import support
from tests.fake_openai import FakeOpenAI, calls, reply

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
LINES = [f"{n:04d} step ok: compiled module_{n} in {n % 97} ms\n" for n in range(1, 2001)]


def tool_messages(fake_openai: FakeOpenAI, request: int) -> dict[str, str]:
    messages = fake_openai.requests[request]["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


async def test_a_cut_result_is_kept_whole_and_read_in_parts(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    lines = [*LINES[:1800], f"1801 deploy token={TOKEN}\n", *LINES[1801:]]
    (workdir / "build.log").write_text("".join(lines))
    session = "slack:T1:C1:1700000000.000100"
    kept = output_path(session, "c1").as_posix()
    fake_openai.script = [
        calls(("c1", "read", {"path": "build.log"})),
        calls(
            ("c2", "read", {"path": kept, "offset": 1500, "limit": 5}),
            ("c3", "read", {"path": kept, "offset": 1995}),
            ("c4", "read", {"path": kept, "offset": 2001}),
        ),
        reply("The build log ends well."),
    ]
    provider = OpenAIProvider("fake-model", api_key="k", base_url=fake_openai.base_url)
    runtime, _ = support.make_runtime(redis, workdir, provider)

    result = await runtime.run(session, "how did the build end?", support.ALICE, support.HERE)

    assert result.stop_reason is StopReason.FINAL
    whole = "".join(lines)
    first = tool_messages(fake_openai, 1)["c1"]
    assert first == whole[:16_000] + (
        f"\n[output cut at 16000 of {len(whole)} characters; the whole output is in {kept}: "
        "read the rest with the read tool (offset and limit count lines)]"
    )
    # Kept whole, a secret in it masked: an unapproved command may read the work dir.
    on_disk = (workdir / kept).read_text()
    assert on_disk == whole.replace(TOKEN, "[redacted]") and TOKEN not in on_disk
    parts = tool_messages(fake_openai, 2)
    assert (
        parts["c2"]
        == "".join(lines[1499:1504]) + "[lines 1500-1504 of 2000; read on with offset 1505]"
    )
    assert parts["c3"] == "".join(lines[1994:])
    assert parts["c4"] == (
        f"read failed: offset 2001 is past the end of {kept}, which has 2000 lines"
    )


async def test_a_link_planted_where_outputs_go_is_not_followed(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """An approved command may have made `.clawgate/outputs` a link out of the work dir: the
    output is not written through it, and the model is told only of the cut."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workdir / ".clawgate").mkdir()
    (workdir / ".clawgate" / "outputs").symlink_to(elsewhere)
    (workdir / "build.log").write_text("".join(LINES))
    fake_openai.script = [calls(("c1", "read", {"path": "build.log"})), reply("Long log.")]
    provider = OpenAIProvider("fake-model", api_key="k", base_url=fake_openai.base_url)
    runtime, _ = support.make_runtime(redis, workdir, provider)

    result = await runtime.run("s-link", "read the log", support.ALICE, support.HERE)

    assert result.stop_reason is StopReason.FINAL
    told = tool_messages(fake_openai, 1)["c1"]
    assert told.endswith(f"\n[output cut at 16000 of {len(''.join(LINES))} characters]")
    assert list(elsewhere.iterdir()) == []
