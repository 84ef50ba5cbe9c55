"""`clawgate chat` at a terminal: the real process in a pseudo-terminal (pexpect), its screen
kept by a terminal emulator (pyte) that also answers the cursor position requests a real
terminal answers. Line editing and history, the status line, the start line, relayed lines."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.console.terminal import Status, start_line
from runtime.channel import ToolFinished, ToolStarted
from runtime.models import ToolStatus
from tests.fake_openai import FakeOpenAI, Step
from tests.processes import chat, clean_env

try:
    import pexpect
    import pyte
except ImportError:  # pragma: no cover - the dev extra installs both
    if os.environ.get("CI", "").lower() == "true":
        raise  # under CI a missing dependency is a failure, not a skip
    pytest.skip("needs pexpect and pyte (pip install -e '.[dev]')", allow_module_level=True)

ID_LINE = re.compile(r"id ([a-z0-9]{13}): /approve")
OFFER = "decide? [y/a/e/n, Esc later]"
ROWS, COLS = 60, 120  # tall enough that nothing scrolls off the emulated screen


class Screen(pyte.Screen):
    """A screen that answers the cursor position requests a real terminal answers."""

    def __init__(self, child: pexpect.spawn[str]) -> None:
        super().__init__(COLS, ROWS)
        self.child = child

    def write_process_input(self, data: str) -> None:
        self.child.send(data)


class PtyChat:
    """`clawgate chat` in a pseudo-terminal, as a person at a terminal runs it."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        # The history file goes to a state directory of the test's own, not the runner's.
        state = str(workdir.parent / "state")
        env = {"XDG_STATE_HOME": state, **env, "TERM": "xterm", "PYTHONUTF8": "1"}
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "bot.cli", "chat"],
            cwd=str(workdir),
            env=env,
            dimensions=(ROWS, COLS),
            encoding="utf-8",
            codec_errors="replace",
        )
        self.screen = Screen(self.child)
        self.stream = pyte.Stream(self.screen)
        self.raw: list[str] = []
        self.ended = False

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.lines())

    def last_line(self) -> str:
        return next((line for line in reversed(self.lines()) if line), "")

    async def pump(self) -> None:
        """Feed what the chat printed so far to the screen."""
        while not self.ended:
            try:
                data = self.child.read_nonblocking(65536, timeout=0)
            except pexpect.TIMEOUT:
                return
            except pexpect.EOF:
                self.ended = True
                return
            self.raw.append(data)
            self.stream.feed(data)

    async def until(self, check: Callable[[PtyChat], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            await self.pump()
            if check(self):
                return
            if self.ended or time.monotonic() > deadline:
                raise AssertionError(f"no {what} on the screen:\n{self.text()}")
            await asyncio.sleep(0.02)

    async def line_matching(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        found: list[re.Match[str]] = []

        def check(chat: PtyChat) -> bool:
            found[:] = [m for line in chat.lines() if (m := re.search(pattern, line))]
            return bool(found)

        await self.until(check, repr(pattern), timeout)
        return found[-1]

    async def offered(self) -> None:
        """The prompt that lets single keys decide the request just made."""
        # Its line, with the request and the keys in the bar at the bottom of the screen.
        await self.until(lambda c: OFFER in c.lines() and "n reject" in c.last_line(), "an offer")

    async def later(self) -> None:
        """Esc: the request offered is left for later, the prompt is the usual one."""
        await self.offered()
        self.child.send("\x1b")
        await self.prompt()

    async def count(self, text: str, n: int) -> None:
        await self.until(lambda c: c.text().count(text) == n, f"{n} times {text!r}")

    async def prompt(self, typed: str = "") -> None:
        """The prompt is the last line, with `typed` on it, and no status line under it."""
        want = f"you> {typed}".rstrip()
        await self.until(lambda c: c.last_line() == want, f"prompt {want!r}")

    async def exit_code(self) -> int:
        await self.until(lambda c: c.ended, "end of the chat")
        self.child.close()
        code = self.child.exitstatus
        assert code is not None, self.child.signalstatus
        return code

    def kill(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


async def running_seconds(chat: PtyChat, pattern: str, until: str) -> set[int]:
    """The seconds the status line counted while `pattern` showed, until `until` is printed."""
    seen: set[int] = set()

    def check(c: PtyChat) -> bool:
        for line in c.lines():
            if match := re.fullmatch(pattern + r"… (\d+) s   Ctrl-C stops it", line):
                seen.add(int(match.group(1)))
        return until in c.text()

    await chat.until(check, repr(until))
    return seen


@pytest.mark.e2e
async def test_status_line_history_and_start_line(workdir: Path) -> None:
    chat_proc = PtyChat(workdir, clean_env(CLAWGATE_SANDBOX="off"))
    try:
        await chat_proc.prompt()
        assert "clawgate chat · model offline demo · store embedded, nothing kept" in (
            chat_proc.lines()
        )

        chat_proc.child.send("run: sleep 3\r")
        seconds = await running_seconds(chat_proc, "running bash", "[exit code 0]")
        assert {1, 2} <= seconds, seconds  # the clock advanced while the command ran
        await chat_proc.prompt()  # the status line is gone with the request
        assert "  < $ sleep 3 (exit 0) [ok]" in chat_proc.lines()

        chat_proc.child.send("\x1b[A")  # Up: the previous line, ready to send again
        await chat_proc.prompt("run: sleep 3")
        chat_proc.child.send("\r")
        await chat_proc.line_matching(r"^running bash… \d+ s")
        await chat_proc.count("[exit code 0]", 2)
        await chat_proc.prompt()
        assert chat_proc.text().count("  > $ sleep 3") == 2
        assert "^[" not in chat_proc.text()

        chat_proc.child.send("read noth")  # Ctrl-C clears a typed line
        await chat_proc.prompt("read noth")
        chat_proc.child.send("\x03")
        await chat_proc.prompt()
        chat_proc.child.send("\x04")  # Ctrl-D quits
        assert await chat_proc.exit_code() == 0
    finally:
        chat_proc.kill()


@pytest.mark.e2e
async def test_ctrl_c_stops_a_running_command(workdir: Path) -> None:
    chat_proc = PtyChat(workdir, clean_env(CLAWGATE_SANDBOX="off"))
    try:
        await chat_proc.prompt()
        chat_proc.child.send("run: sleep 30; echo too-late\r")
        await chat_proc.line_matching(r"^running bash… 1 s")
        chat_proc.child.send("\x03")
        await chat_proc.line_matching(r"^\[run stopped: cancelled\]$", timeout=10)
        await chat_proc.prompt()
        chat_proc.child.send("\x04")
        assert await chat_proc.exit_code() == 0
        assert "too-late" not in [line.strip() for line in chat_proc.lines()]  # never echoed
        assert "[exit code" not in chat_proc.text()
    finally:
        chat_proc.kill()


@pytest.mark.e2e
async def test_thinking_status_and_a_real_model_named(
    workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [Step(content="slow answer 77", delay=3)]
    secret = "sk-test-do-not-print-0123456789"
    env = clean_env(
        OPENAI_BASE_URL=fake_openai.base_url, OPENAI_API_KEY=secret, CLAWGATE_MODEL="fake-model"
    )
    chat_proc = PtyChat(workdir, env)
    try:
        await chat_proc.prompt()
        assert f"model fake-model (127.0.0.1:{fake_openai.port})" in chat_proc.text()
        chat_proc.child.send("hello\r")
        seconds = await running_seconds(chat_proc, "thinking", "slow answer 77")
        assert {1, 2} <= seconds, seconds
        await chat_proc.prompt()
        chat_proc.child.send("\x03")  # Ctrl-C on an empty line with nothing running: quit
        assert await chat_proc.exit_code() == 130
        assert secret not in "".join(chat_proc.raw)
    finally:
        chat_proc.kill()


@pytest.mark.e2e
async def test_relayed_lines_print_above_what_is_being_typed(workdir: Path, redis_url: str) -> None:
    """A decision from the shell resumes the run in another process; its lines reach the
    chat's screen above the prompt, and the line being typed stays as it was."""
    (workdir / "victim.txt").write_text("v")
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX="cgtty", CLAWGATE_SANDBOX="off")
    chat_proc = PtyChat(workdir, env)
    try:
        await chat_proc.prompt()
        assert f"clawgate chat · model offline demo · store {redis_url}" in chat_proc.lines()
        chat_proc.child.send("run: rm victim.txt\r")
        approval_id = (await chat_proc.line_matching(ID_LINE.pattern)).group(1)
        await chat_proc.later()
        chat_proc.child.send("read vic")
        await chat_proc.prompt("read vic")

        code, _, err = await chat("", workdir, env, "approvals", "approve", approval_id)
        assert code == 0, err
        await chat_proc.line_matching(rf"^\[approval {approval_id} [a-z ]+ by operator:")
        await chat_proc.line_matching(r"^\[exit code 0\]$")
        await chat_proc.prompt("read vic")
        assert not (workdir / "victim.txt").exists()
        chat_proc.child.send("\x03\x04")
        assert await chat_proc.exit_code() == 0
    finally:
        chat_proc.kill()


def test_start_line_masks_passwords_and_names_no_key() -> None:
    line = start_line(
        "gpt-4.1",
        "https://user:hunter2@llm.example.com:8443/v1",
        "redis://:hunter2@db.example.com:6379/0?password=hunter2",
        demo=False,
    )
    assert line.startswith("clawgate chat · model gpt-4.1 (llm.example.com:8443) · store redis://")
    assert "hunter2" not in line and "db.example.com:6379/0" in line
    assert start_line("m", None, None, demo=False).endswith(
        "model m (api.openai.com) · store embedded, nothing kept"
    )
    assert "\x1b" not in start_line("m\x1b[2J", None, "unix:///run/redis.sock", demo=False)


def test_status_follows_the_request_and_its_tool_calls() -> None:
    now = [100.0]
    status = Status(clock=lambda: now[0])
    assert status.text() == ""
    status.start()
    now[0] += 3.7
    assert status.text() == "thinking… 3 s"
    status.see(ToolStarted("c1", "bash", "$ sleep 9"))
    status.see(ToolStarted("c2", "read", "read a"))
    now[0] += 12.2
    assert status.text() == "running bash, read… 12 s"
    status.see(ToolFinished("c2", "read", ToolStatus.COMPLETED, "read a"))
    assert status.text() == "running bash… 12 s"
    status.see(ToolFinished("c1", "bash", ToolStatus.COMPLETED, "$ sleep 9"))
    assert status.text() == "thinking… 0 s"
    status.stop()
    status.see(ToolStarted("c3", "bash", "$ ls"))  # not this chat's request
    assert status.text() == ""


@pytest.mark.e2e
async def test_tab_a_bare_approve_a_second_ctrl_d_and_a_kept_history(workdir: Path) -> None:
    state = workdir.parent / "state"
    env = clean_env(CLAWGATE_SANDBOX="off", XDG_STATE_HOME=str(state))
    (workdir / "victim.txt").write_text("x")
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    chat_proc = PtyChat(workdir, env)
    try:
        await chat_proc.prompt()
        chat_proc.child.send("/pen\t")  # Tab completes a command
        await chat_proc.prompt("/pending")
        chat_proc.child.send("\x03")
        await chat_proc.prompt()
        chat_proc.child.send(f"read {token}.txt\r")
        chat_proc.child.send("run: rm -f victim.txt\r")
        approval = (await chat_proc.line_matching(ID_LINE.pattern)).group(1)
        await chat_proc.later()
        chat_proc.child.send("/reject \t")  # ... and the id of the one request waiting
        await chat_proc.prompt(f"/reject {approval}")
        chat_proc.child.send("\x03")
        await chat_proc.prompt()

        chat_proc.child.send("\x04")  # Ctrl-D with a request waiting: said, not quit
        said = (
            f"1 request waits for a decision ({approval}); the embedded store keeps nothing: "
            "quitting loses it. Ctrl-D again quits."
        )
        await chat_proc.until(lambda c: said in "".join(c.lines()), "the quit warning")
        await chat_proc.prompt()
        chat_proc.child.send("/approve\r")  # the one waiting: no id needed
        await chat_proc.line_matching(rf"^Approved bash \({approval}\)\.$")
        await chat_proc.prompt()
        assert not (workdir / "victim.txt").exists()
        chat_proc.child.send("\x04")  # nothing waits: quits at once
        assert await chat_proc.exit_code() == 0
    finally:
        chat_proc.kill()

    kept = state / "clawgate" / "chat-history"
    assert kept.stat().st_mode & 0o777 == 0o600
    assert "+run: rm -f victim.txt" in kept.read_text() and token not in kept.read_text()
    again = PtyChat(workdir, env)  # the next chat has the lines typed in this one
    try:
        await again.prompt()
        again.child.send("\x1b[A")
        await again.prompt("/approve")
        again.child.send("\x03\x04")
        assert await again.exit_code() == 0
    finally:
        again.kill()


@pytest.mark.e2e
async def test_single_keys_decide_the_request_just_made(workdir: Path) -> None:
    """y approves once, a always, e puts the call's arguments on the line to change, n puts
    /reject on it for the reason, Esc leaves it, and so does any other key, typed."""
    for name in ("a", "b", "c", "d", "e", "f"):
        (workdir / f"{name}.txt").write_text(name)
    chat_proc = PtyChat(workdir, clean_env(CLAWGATE_SANDBOX="off"))
    try:
        await chat_proc.prompt()

        async def ask(name: str) -> str:
            """Run `rm <name>.txt`; the id of the request it makes, once offered."""
            chat_proc.child.send(f"run: rm {name}.txt\r")
            asked = f"[approval needed] bash: rm {name}.txt"
            await chat_proc.until(lambda c: asked in c.lines(), asked)
            await chat_proc.offered()
            return (await chat_proc.line_matching(ID_LINE.pattern)).group(1)

        first = await ask("a")
        chat_proc.child.send("y")
        await chat_proc.line_matching(rf"^Approved bash \({first}\)\.$")
        await chat_proc.prompt()
        assert not (workdir / "a.txt").exists()

        third = await ask("c")
        chat_proc.child.send("e")
        await chat_proc.prompt(f'/approve {third} edit {{"command": "rm c.txt"}}')
        chat_proc.child.send("\x03")  # not sent: the request still waits
        await chat_proc.prompt()
        assert (workdir / "c.txt").exists()
        chat_proc.child.send(f"/reject {third}\r")
        await chat_proc.line_matching(rf"^Rejected bash \({third}\)\.$")

        fourth = await ask("d")
        chat_proc.child.send("n")
        await chat_proc.prompt(f"/reject {fourth}")
        chat_proc.child.send("not today\r")
        await chat_proc.line_matching(rf"^Rejected bash \({fourth}\)\.$")
        assert (workdir / "d.txt").exists()

        fifth = await ask("e")
        chat_proc.child.send("\x1b")  # Esc: the usual prompt, and keys type again
        await chat_proc.prompt()
        chat_proc.child.send("y")
        await chat_proc.prompt("y")
        chat_proc.child.send("\x03")
        await chat_proc.prompt()
        assert (workdir / "e.txt").exists()
        chat_proc.child.send("/reject\r")  # the one waiting, later
        await chat_proc.line_matching(rf"^Rejected bash \({fifth}\)\.$")

        sixth = await ask("f")
        chat_proc.child.send("/pend")  # any other key: left for later, and typed
        await chat_proc.prompt("/pend")
        chat_proc.child.send("ing\r")
        await chat_proc.line_matching(rf"^{sixth}  waiting: bash: rm f\.txt")
        chat_proc.child.send("/reject\r")
        await chat_proc.line_matching(rf"^Rejected bash \({sixth}\)\.$")
        await chat_proc.prompt()

        await ask("b")
        chat_proc.child.send("a")  # always (last: it allows the rm calls after it)
        await chat_proc.line_matching(r"are now allowed in this conversation", timeout=15)
        await chat_proc.prompt()
        assert not (workdir / "b.txt").exists()
    finally:
        chat_proc.kill()
