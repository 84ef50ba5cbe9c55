"""Modes and models across processes: a `clawgate chat` switches its conversation's mode and
model; the next process over the same Redis (a restart) runs with both."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI, calls, reply
from tests.processes import chat, clean_env

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier


async def test_mode_and_model_switched_in_one_process_hold_in_the_next(
    workdir: Path, tmp_path: Path, redis_url: str, fake_openai: FakeOpenAI, big_model: FakeOpenAI
) -> None:
    policy = tmp_path / "clawgate.toml"
    policy.write_text(
        '[modes]\nmax = "edits"\n\n[[models]]\nname = "big"\n'
        f'base_url = "{big_model.base_url}"\napi_key_env = "BIG_MODEL_KEY"\n'
        'model = "big-model-1"\ncontext_window = 65536\n'
    )
    env = clean_env(
        REDIS_URL=redis_url,
        CLAWGATE_REDIS_PREFIX="cgmodes",
        OPENAI_BASE_URL=fake_openai.base_url,
        CLAWGATE_MODEL="fake-model",
        CLAWGATE_POLICY_FILE=str(policy),
        BIG_MODEL_KEY="sk-big",
    )
    code, out, _ = await chat("/mode plan\n/model big\n", workdir, env, "chat", "--session", "m1")
    assert code == 0, out
    assert "Mode: plan, set by" in out and "Model: big, set by" in out

    big_model.script = [calls(("c1", "write", {"path": "a.txt", "content": "x"})), reply("planned")]
    code, out, _ = await chat("make a plan\n", workdir, env, "chat", "--session", "m1")
    assert code == 0, out
    assert "planned" in out and "(model: big)" in out
    assert not fake_openai.requests
    first = big_model.requests[0]
    assert first["model"] == "big-model-1"
    assert [tool["function"]["name"] for tool in first["tools"]] == ["read", "clarify"]
    assert not (workdir / "a.txt").exists()
    assert "plan mode" in big_model.requests[1]["messages"][-1]["content"]
