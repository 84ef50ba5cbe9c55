"""send_file as the judge and the tool see it, on a real work dir: what may leave unasked,
what asks, what never leaves, and what the tool itself refuses (it reads the file again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.channel import Event, FileShared, MessageRef, redacted
from runtime.risk.policy import RiskConfig, RiskPolicy, Verdict
from runtime.tools.base import ToolContext, ToolError
from runtime.tools.sandbox import Access
from runtime.tools.send_file import SendFileArgs, SendFileTool

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(40)
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "wd"
    root.mkdir()
    (root / "report.txt").write_text("3 failed, 118 passed\n")
    (root / "chart.png").write_bytes(PNG)
    (root / "bundle.tgz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(64))
    (root / "notes.txt").write_text(f"deploy with token {TOKEN}\n")
    (root / ".env").write_text("A=1\n")
    (root / "docs").mkdir()
    (root / "docs" / "env.txt").symlink_to("../.env")
    # An image header is six ASCII characters anyone can write before a token.
    (root / "fake.gif").write_bytes(b"GIF89a\n" + f"deploy with token {TOKEN}\n".encode())
    (root / "inside.png").write_bytes(PNG + f"token {TOKEN}".encode())
    (root / f"{TOKEN}.txt").write_text("hello\n")  # the name is shown to everyone
    (root / ".clawgate" / "attachments" / "1.2").mkdir(parents=True)
    (root / ".clawgate" / "attachments" / "1.2" / "log.txt").write_text("ok\n")
    return root


@pytest.mark.parametrize(
    ("path", "verdict", "mention"),
    [
        ("report.txt", Verdict.ALLOW, ""),
        ("chart.png", Verdict.ALLOW, ""),
        ("bundle.tgz", Verdict.ASK, "a binary file (not an image)"),
        ("notes.txt", Verdict.ASK, "looks like a secret"),
        ("fake.gif", Verdict.ASK, "looks like a secret"),
        ("inside.png", Verdict.ASK, "looks like a secret"),
        (f"{TOKEN}.txt", Verdict.ASK, "its name looks like a secret"),
        (".env", Verdict.DENY, "posts a secret to the conversation"),
        ("docs/env.txt", Verdict.DENY, "a link to .env"),
        ("deploy/id_rsa", Verdict.DENY, "posts a secret"),  # by name, even before it exists
        ("", Verdict.ASK, "send_file has no path"),
        (".clawgate/attachments/1.2/log.txt", Verdict.ASK, "may come from another conversation"),
    ],
)
def test_the_judge_of_an_export(workdir: Path, path: str, verdict: Verdict, mention: str) -> None:
    decision = RiskPolicy().assess("send_file", {"path": path}, workdir)
    assert decision.verdict is verdict, decision
    assert all(mention in r for r in decision.reasons[:1]), decision.reasons


def test_a_secret_is_denied_even_where_send_file_is_a_safe_tool(workdir: Path) -> None:
    policy = RiskPolicy(RiskConfig(safe_tools=["read", "send_file"]))
    assert policy.assess("send_file", {"path": ".env"}, workdir).verdict is Verdict.DENY
    assert policy.assess("send_file", {"path": "notes.txt"}, workdir).verdict is Verdict.ALLOW


class Posts:
    def __init__(self, answer: MessageRef | None = None) -> None:
        self.events: list[Event] = []
        self.answer = answer

    async def __call__(self, event: Event) -> MessageRef | None:
        self.events.append(event)
        return self.answer


def context(workdir: Path, posts: Posts, access: Access = Access.READ_ONLY) -> ToolContext:
    return ToolContext("s1", workdir, post=posts, call_id="c9", access=access)


async def test_the_tool_posts_the_bytes_keyed_by_the_call(workdir: Path) -> None:
    posts = Posts({"ts": "1.2"})
    ctx = context(workdir, posts)
    ctx.retaken = True
    out = await SendFileTool().run(SendFileArgs(path="chart.png", title="Chart"), ctx)
    (event,) = posts.events
    assert event == FileShared("chart.png", PNG, "Chart", "chart.png", "file/s1/c9", again=True)
    assert out.audit["file_bytes"] == str(len(PNG)) and len(out.audit["file_sha256"]) == 64


async def test_the_tool_refuses_what_changed_is_too_big_or_did_not_post(workdir: Path) -> None:
    posts = Posts({"ts": "1.2"})
    # Judged plain, then rewritten to hold a token before the call ran: not posted unasked.
    (workdir / "report.txt").write_text(f"now with {TOKEN}\n")
    with pytest.raises(ToolError, match="changed since the call was checked"):
        await SendFileTool().run(SendFileArgs(path="report.txt"), context(workdir, posts))
    approved = context(workdir, posts, Access.APPROVED)  # what an approver let out goes
    await SendFileTool().run(SendFileArgs(path="report.txt"), approved)
    with pytest.raises(ToolError, match="larger than the 10 bytes"):
        await SendFileTool(max_bytes=10).run(
            SendFileArgs(path="chart.png"), context(workdir, posts)
        )
    with pytest.raises(ToolError, match="could not be posted"):
        await SendFileTool().run(SendFileArgs(path="chart.png"), context(workdir, Posts()))
    assert [e.path for e in posts.events if isinstance(e, FileShared)] == ["report.txt"]


def test_the_words_around_a_file_are_redacted_its_bytes_are_not() -> None:
    event = FileShared(f"a\u202e{TOKEN}.exe", TOKEN.encode(), f"key {TOKEN}", f"{TOKEN}.x", "k")
    shown = redacted(event)
    assert isinstance(shown, FileShared)
    assert TOKEN not in shown.title + shown.name + shown.path and "\\u202e" in shown.name
    assert shown.data == TOKEN.encode()  # what the judge or an approver let out, as it is
