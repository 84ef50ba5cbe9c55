"""What the reading tests (test_slack_reading, test_feishu_reading) share, whatever the
platform: the files they attach, the settings that turn reading on, the access list, and what
the model was given (`asked`, `user_content`, `tool_said`) as FakeOpenAI recorded it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fake_openai import FakeOpenAI

SECRET_TOKEN = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
LOG = b"2026-12-03 build 41 failed: KeyError 'region' in deploy/config.py line 12\n"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + bytes(40)
# Earlier messages (the newest 4), images shown to the model, files up to ~98 KB.
READING = {
    "CLAWGATE_THREAD_CONTEXT_MESSAGES": "4",
    "CLAWGATE_MODEL_IMAGES": "true",
    "CLAWGATE_ATTACHMENT_MAX_BYTES": "100000",
}


def access_policy(tmp_path: Path, *users: str) -> Path:
    """A policy file in `tmp_path` whose access list is `users` (`platform:id`)."""
    policy = tmp_path / "clawgate.toml"
    listed = ", ".join(f'"{user}"' for user in users)
    policy.write_text(f"[access]\nusers = [{listed}]\n")
    return policy


def asked(fake_openai: FakeOpenAI, request: int = -1) -> str:
    """The text of the last user message in a request to the model (default: the last)."""
    content = user_content(fake_openai, request)
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")


def user_content(fake_openai: FakeOpenAI, request: int = -1) -> Any:
    messages = fake_openai.requests[request]["messages"]
    return [m for m in messages if m["role"] == "user"][-1]["content"]


def tool_said(fake_openai: FakeOpenAI, request: int = 1) -> str:
    """What the model was told of its first tool call, in a later request."""
    tool = next(m for m in fake_openai.requests[request]["messages"] if m["role"] == "tool")
    return str(tool["content"])
