"""`clawgate selftest` against the fakes, as CI runs it: it passes with a model that calls its
tools and a Slack that takes the token, and names the cause when the model never calls a tool
or Slack refuses the token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fake_openai import FakeOpenAI, Step, calls, reply
from tests.fake_slack import FakeSlack
from tests.processes import chat, clean_env


def env_of(model: FakeOpenAI, slack: FakeSlack) -> dict[str, str]:
    return clean_env(
        **model.settings(CLAWGATE_MODEL="fake-model"),
        SLACK_BOT_TOKEN="xoxb-selftest",
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=slack.base_url,
        CLAWGATE_SANDBOX="off",
    )


def tool_user(body: dict[str, Any]) -> Step:
    """A model that calls the tool it is asked to, then says what the tool answered."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply(f"The tool said: {last['content']}")
    if "read" in last["content"]:
        return calls(("c1", "read", {"path": "selftest.txt"}))
    return calls(("c2", "write", {"path": "result.txt", "content": "DONE"}))


async def test_selftest_passes_with_a_model_that_calls_tools(
    fake_openai: FakeOpenAI, slack: FakeSlack, tmp_path: Path
) -> None:
    fake_openai.respond = tool_user
    code, out, err = await chat("", tmp_path, env_of(fake_openai, slack), "selftest")
    assert code == 0, out + err
    assert out.splitlines() == [
        out.splitlines()[0],  # the bot and its team
        "✓ tool call: the model read a file with its tool and told its content",
        "✓ approval: a write asked, was approved as the operator and ran once",
        "selftest passed.",
    ]
    assert out.startswith("✓ slack: bot ")
    assert [c.method for c in slack.calls()] == ["auth.test"]
    assert "Unclosed" not in err  # the model client's connections are closed on the way out


async def test_a_model_that_never_calls_a_tool_is_named_with_the_fix(
    fake_openai: FakeOpenAI, slack: FakeSlack, tmp_path: Path
) -> None:
    fake_openai.respond = lambda _: reply("I cannot open files, sorry.")
    code, out, _ = await chat("", tmp_path, env_of(fake_openai, slack), "selftest")
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == (
        "✗ tool call: the model answered without calling a tool (tool_calls=0): I cannot open "
        "files, sorry."
    )
    assert lines[2].startswith("    fix: use a model that calls tools (function calling)")
    assert lines[-1] == "1 of 2 failed."


async def test_a_refused_slack_token_is_named_and_nothing_runs(
    fake_openai: FakeOpenAI, slack: FakeSlack, tmp_path: Path
) -> None:
    fake_openai.respond = tool_user
    slack.error_next("auth.test", "invalid_auth")
    code, out, _ = await chat("", tmp_path, env_of(fake_openai, slack), "selftest")
    assert code == 1
    assert out.splitlines() == [
        "✗ slack: auth.test: invalid_auth",
        "    fix: check SLACK_BOT_TOKEN (xoxb-…)",
        "1 of 1 failed.",
    ]
    assert fake_openai.requests == []  # nothing asked of the model
