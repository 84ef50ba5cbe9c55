"""MCP tools under the gate, end to end: `clawgate serve` (the real aiohttp server, slack-bolt
against FakeSlack, a real Redis, the in-process worker) with a real MCP server written with the
`mcp` SDK (tests/mcp_server.py), over stdio (started by clawgate in its bwrap sandbox) and over
streamable HTTP (a process of the test's own). What reached the server is read from its log."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.inbound import APPROVE_ONCE, REJECT
from bot.policy_file import load_policy_file
from bot.wiring import TOOL_NAMES
from runtime.audit import AuditLog
from runtime.mcp.connection import HEALTH_TIMEOUT
from runtime.models import ToolMessage
from runtime.store.keys import Keys
from tests.e2e.test_slack_serve import (
    ADMIN,
    APPROVER,
    CHANNEL,
    Harness,
    block_text,
    blocks_of,
    click,
    eventually,
    request_risky,
    sample,
    serving,
    session_of,
)
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.fake_slack import FakeSlack, command_body, event_body, mention_event, next_ts
from tests.mcp_support import (
    SERVER,
    HttpMcp,
    calls_in,
    http_mcp,
    kill_servers,
    write_policy,
)
from tests.processes import chat, clean_env
from tests.support import working_sandbox

pytestmark = pytest.mark.e2e

TRANSPORTS = ["stdio", "http"]
TIMEOUT = 2.0  # the frozen server's call timeout


@contextlib.asynccontextmanager
async def with_server(
    transport: str, fake: FakeSlack, workdir: Path, redis_url: str, **settings: Any
) -> AsyncIterator[tuple[Harness, Path, HttpMcp | None]]:
    """Serve with the test MCP server plugged in as `test`; yields the harness, the server's
    call log and (HTTP) the server process."""
    working_sandbox()  # the stdio server runs in bwrap: a machine without it fails under CI
    log = workdir / "calls.log"
    server: str = settings.pop("server", "")
    timeout: float = settings.pop("timeout", 20)
    tools: str = settings.pop("tools", 'allow = ["read", "bash", "test.*"]')
    async with contextlib.AsyncExitStack() as stack:
        http = None
        if transport == "http":
            http = await stack.enter_async_context(http_mcp(log))
        policy = write_policy(
            workdir.parent / "clawgate.toml",
            log,
            url=None if http is None else http.url,
            tools=tools,
            server=server,
            timeout=timeout,
        )
        h = await stack.enter_async_context(
            serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy), **settings)
        )
        yield h, log, http


def model(fake_openai: FakeOpenAI) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-test",
        "CLAWGATE_MODEL": "fake-model",
    }


async def mention(h: Harness, text: str, user: str = "U_ALICE") -> str:
    ts = next_ts()
    status, _ = await h.post(event_body(mention_event(text, user=user, ts=ts)))
    assert status == 200
    return ts


async def slash(h: Harness, text: str, user: str) -> str:
    """`/clawgate <text>` typed by `user`; what clawgate answered (to them alone)."""
    url = h.fake.new_response_url()
    status, _ = await h.post(command_body("/clawgate", text, user_id=user, response_url=url))
    assert status == 200
    (answer,) = await h.fake.await_for(lambda: h.fake.responses(url), 15, what=text)
    return str(answer.body["text"])


async def said(h: Harness, ts: str, part: str) -> str:
    """Wait for a post, an edit or a streamed answer in the thread that contains `part`; its
    text."""

    def found() -> str | None:
        said = [
            *h.fake.said(CHANNEL, ts),
            *(m.text or "" for m in h.fake.bot_messages(CHANNEL, ts)),
        ]
        return next((text for text in said if part in text), None)

    return await h.fake.await_for(found, 30, what=repr(part))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_call_asks_is_approved_in_slack_runs_once_and_reaches_the_model(
    transport: str, fake: FakeSlack, fake_openai: FakeOpenAI, workdir: Path, redis_url: str
) -> None:
    fake_openai.script = [
        calls(("c1", "test__create_issue", {"title": "Broken build", "labels": ["ci"]})),
        reply("Filed it as issue 1."),
    ]
    async with with_server(transport, fake, workdir, redis_url, **model(fake_openai)) as (
        h,
        log,
        _,
    ):
        _, ready = await h.get("/readyz")
        assert f"mcp test ({transport}): up, 6 tools" in ready, ready
        pending = await request_risky(h, "file an issue about the broken build")
        offered = [t["function"]["name"] for t in fake_openai.requests[0]["tools"]]
        assert "test__create_issue" in offered and "test__lookup" in offered  # API-safe names
        details = block_text(blocks_of(pending.notice))
        assert "test.create_issue" in details and "MCP server test" in details, details
        assert "Broken build" in details
        await h.drained()
        assert calls_in(log) == []  # nothing reached the server while it waited

        status, _ = await click(h, pending, APPROVE_ONCE, APPROVER)
        assert status == 200
        await said(h, pending.thread_ts, "Filed it as issue 1.")
        await h.drained()

        assert calls_in(log) == ["create_issue Broken build"]  # exactly once
        result = fake_openai.requests[1]["messages"][-1]
        assert result["role"] == "tool" and "created issue #1: Broken build" in result["content"]
        assert await h.approval_status(pending.session, pending.approval_id) == "consumed"
        _, metrics = await h.get("/metrics")
        labels = {"server": "test", "tool": "create_issue", "outcome": "completed"}
        assert sample(metrics, "clawgate_mcp_calls_total", **labels) >= 1
        assert sample(metrics, "clawgate_mcp_server_up", server="test") == 1


async def test_denied_and_rejected_calls_never_reach_the_server(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    tools = 'allow = ["read", "bash", "test.*"]\ndeny = ["test.leak"]'
    async with with_server("stdio", fake, workdir, redis_url, tools=tools) as (h, log, _):
        ts = await mention(h, "call test.leak {}")
        await said(h, ts, "The 'test.leak' tool is not enabled here")  # not even offered
        answer = await slash(h, "policy allow test.leak", ADMIN)
        assert "test.leak stays denied" in answer  # a deny in the file wins
        pending = await request_risky(h, 'call test.create_issue {"title": "nope"}')
        status, _ = await click(h, pending, REJECT, ADMIN)
        assert status == 200
        await h.drained()
        assert calls_in(log) == []


async def test_read_only_tool_of_a_trusted_server_runs_without_asking_and_policy_allow(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    """readOnlyHint counts only where an admin trusts the server; an MCP tool is off until
    the policy allows it (`/policy allow`)."""
    tools = 'allow = ["read", "bash"]'
    server = "trust_annotations = true"
    async with with_server("stdio", fake, workdir, redis_url, tools=tools, server=server) as (
        h,
        log,
        _,
    ):
        ts = await mention(h, 'call test.lookup {"key": "answer"}')
        await said(h, ts, "The 'test.lookup' tool is not enabled here")  # off by default
        await h.drained()
        assert calls_in(log) == []

        answer = await slash(h, "policy allow test.lookup", ADMIN)
        assert "test.lookup in slack:" in answer and "now allowed" in answer, answer
        ts = await mention(h, 'call test.lookup {"key": "answer"}')
        await said(h, ts, "the value of answer is 42")
        await h.drained()
        assert calls_in(log) == ["lookup answer"]
        assert not [c for c in h.fake.posts(CHANNEL, ts) if c.is_notice]  # no ask


async def test_schema_invalid_arguments_never_reach_the_server(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    async with with_server("stdio", fake, workdir, redis_url) as (h, log, _):
        ts = await mention(h, 'call test.create_issue {"title": 7}')
        text = await said(h, ts, "invalid arguments for test.create_issue")
        assert "title: 7 is not of type 'string'" in text
        ts = await mention(h, 'call test.create_issue {"title": "' + "x" * 81 + '"}')
        await said(h, ts, "is too long")
        await h.drained()
        assert calls_in(log) == []
        assert not [c for c in h.fake.posts(CHANNEL) if c.is_notice]  # none asked


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_killed_mid_call_ends_the_run_clearly_and_recovers(
    transport: str, fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    async with with_server(transport, fake, workdir, redis_url) as (h, log, http):
        pending = await request_risky(h, 'call test.hang {"note": "deploy"}')
        status, _ = await click(h, pending, APPROVE_ONCE, APPROVER)
        assert status == 200
        await h.fake.await_for(lambda: calls_in(log) == ["hang deploy"], 20, what="the call")
        if http is None:
            assert kill_servers(log) == 1
        else:
            http.kill()
        text = await said(h, pending.thread_ts, "stopped during the call")
        assert "whether it took effect is unknown" in text
        await h.drained()
        assert await h.approval_status(pending.session, pending.approval_id) == "consumed"
        if http is not None:
            await http.start()  # the operator brings it back; clawgate reconnects

        async def up() -> bool:
            _, ready = await h.get("/readyz")
            return f"mcp test ({transport}): up" in ready

        await h.fake.await_for(up, 30, what="the server up again")
        again = await request_risky(h, 'call test.lookup {"key": "after"}')
        status, _ = await click(h, again, APPROVE_ONCE, APPROVER)
        assert status == 200
        await said(h, again.thread_ts, "the value of after is 42")
        await h.drained()
        assert calls_in(log) == ["hang deploy", "lookup after"]  # nothing ran twice
        _, ready = await h.get("/readyz")
        # Restarted (how often depends on how fast the server came back: backoff 1 s, 2 s, ...)
        restarts = re.search(r"mcp test \(\w+\): up, 6 tools \((\d+) restarts\)", ready)
        assert restarts and int(restarts[1]) >= 1, ready


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_tool_that_needs_sampling_is_refused_plainly_and_offered_no_more(
    transport: str, fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    """clawgate offers its model to no server (no MCP sampling): the server refuses the call
    before running it; the chat is told why, and the tool is not offered again."""
    server = 'no_approval = ["summarize"]'
    async with with_server(transport, fake, workdir, redis_url, server=server) as (h, log, _):
        ts = await mention(h, 'call test.summarize {"text": "a long report"}')
        text = await said(h, ts, "needs sampling")
        assert "clawgate does not provide" in text and "not offered" in text, text
        await h.drained()
        ts = await mention(h, 'call test.summarize {"text": "again"}')
        await said(h, ts, "The 'test.summarize' tool is not enabled here")
        _, ready = await h.get("/readyz")
        assert f"mcp test ({transport}): up, 5 tools, 1 not offered" in ready, ready
        await h.drained()
        assert calls_in(log) == []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_that_stops_answering_fails_the_call_within_its_timeout(
    transport: str, fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    """A frozen server (SIGSTOP): the call fails within the server's own `timeout`, the
    tool list read first included, saying the server stopped answering, and is not sent."""
    server = 'no_approval = ["lookup"]'
    async with with_server(transport, fake, workdir, redis_url, server=server, timeout=TIMEOUT) as (
        h,
        log,
        http,
    ):
        ts = await mention(h, 'call test.lookup {"key": "before"}')
        await said(h, ts, "the value of before is 42")
        await h.drained()
        if http is None:
            assert kill_servers(log, signal.SIGSTOP) == 1
        else:
            assert http.proc is not None
            http.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            ts = await mention(h, 'call test.lookup {"key": "frozen"}')
            text = await said(h, ts, "stopped answering")
            waited = time.monotonic() - started
            assert f"no tool list within {TIMEOUT:g} s" in text and "not sent" in text, text
            assert "did not start" not in text
            # Its own 2 s, not the 10 s health check's (the run answers right after).
            assert waited < HEALTH_TIMEOUT, waited
        finally:
            if http is None:
                kill_servers(log, signal.SIGCONT)
            else:
                assert http.proc is not None
                http.proc.send_signal(signal.SIGCONT)
        await h.drained()
        assert calls_in(log) == ["lookup before"]


async def test_a_changed_tool_list_is_read_again_and_no_call_runs_under_an_old_schema(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    server = 'no_approval = ["grow"]'
    async with with_server("stdio", fake, workdir, redis_url, server=server) as (h, log, _):
        pending = await request_risky(h, 'call test.create_issue {"title": "old"}')
        ts = await mention(h, "call test.grow {}")
        await said(h, ts, "grown")
        registry = h.service.runtime.registry

        async def read_again() -> bool:  # on the server's notice, in the background
            return registry.known("test.fresh")

        await eventually(read_again, h, "the tool list read again")
        assert not registry.known("test.lookup")  # vanished: unknown
        ts = await mention(h, 'call test.lookup {"key": "gone"}')
        await said(h, ts, "The 'test.lookup' tool is not enabled here")
        # Approved after its tool changed: refused, never run under the new schema.
        status, _ = await click(h, pending, APPROVE_ONCE, APPROVER)
        assert status == 200
        await said(h, pending.thread_ts, "changed on its server since this call was approved")
        await h.drained()
        assert calls_in(log) == ["grow -"]
        assert await h.approval_status(pending.session, pending.approval_id) == "consumed"


async def test_doctor_shows_each_server_s_state(workdir: Path) -> None:
    log = workdir / "calls.log"
    working_sandbox()
    broken = '\n[mcp.stdio.broken]\ncommand = ["/bin/false"]\n'
    policy = write_policy(workdir.parent / "clawgate.toml", log, server=broken)
    env = clean_env(CLAWGATE_POLICY_FILE=str(policy), CLAWGATE_WORKDIR=str(workdir))
    code, out, err = await chat("", workdir, env, "doctor")
    assert code == 1, out + err  # one server is down
    assert "✓ mcp test: stdio, up: 6 tools" in out, out
    # Down, or (caught between its restarts) starting again: not up, and said so.
    assert re.search(r"✗ mcp broken: stdio, (down|starting): ", out), out
    assert "fix: see docs/mcp.md" in out, out
    assert calls_in(log) == []  # listed, never called


async def test_doctor_says_when_a_server_could_not_write_in_its_sandbox(workdir: Path) -> None:
    """A server that writes a cache beside its own code (shown read-only in its sandbox) at
    start, and goes on without: up, but doctor fails it, naming the path and the fix, before a
    first call does."""
    working_sandbox()
    log, cache = workdir / "calls.log", SERVER.parent / f".cache-{workdir.parent.name}" / "x"
    policy = write_policy(workdir.parent / "clawgate.toml", log, arguments=("--cache", str(cache)))
    env = clean_env(CLAWGATE_POLICY_FILE=str(policy), CLAWGATE_WORKDIR=str(workdir))
    code, out, err = await chat("", workdir, env, "doctor")
    assert code == 1, out + err
    line = next(line for line in out.splitlines() if "mcp test" in line)
    assert line.startswith("✗ mcp test: stdio, up: 6 tools; but it could not write "), out
    assert str(cache.parent) in line and "XDG_CACHE_HOME" in line and "writable_workdir" in line
    assert not cache.exists()


async def test_a_reloaded_policy_file_stops_and_starts_servers(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    async with with_server("stdio", fake, workdir, redis_url) as (h, log, _):
        policies, registry = h.service.runtime.policies, h.service.runtime.registry
        assert registry.known("test.lookup")
        path = Path(str(h.settings.policy_file))
        original = path.read_text()
        path.write_text(original + "enabled = false\n")
        assert await policies.replace(load_policy_file(path, TOOL_NAMES), "test")
        await h.fake.await_for(lambda: not registry.known("test.lookup"), 10, what="stopped")
        _, ready = await h.get("/readyz")
        assert "mcp test" not in ready
        path.write_text(original)
        assert await policies.replace(load_policy_file(path, TOOL_NAMES), "test")
        await h.fake.await_for(lambda: registry.known("test.lookup"), 20, what="started")
        assert kill_servers(log) == 1  # exactly one server process: the old one is gone


async def test_results_are_capped_for_the_model_redacted_in_chat_and_attributed(
    fake: FakeSlack, workdir: Path, redis_url: str
) -> None:
    server = 'no_approval = ["leak"]'
    async with with_server("stdio", fake, workdir, redis_url, server=server) as (h, log, _):
        ts = await mention(h, "call test.leak {}")
        await h.drained()
        assert calls_in(log) == ["leak -"]
        # What ran, listed under the answer: the tool's result redacted there too.
        (answer,) = h.fake.answers(CHANNEL, ts)
        steps = str(answer.blocks)
        assert "test.leak: token [redacted]" in steps and "ghp_" not in str(h.fake.calls())
        history = await h.service.runtime.history.load(session_of(ts))
        (result,) = [m for m in history if isinstance(m, ToolMessage)]
        assert "[output cut at 16000 of 36047 characters; the whole output is in " in result.content
        entries = await AuditLog(h.redis, Keys(h.prefix)).newest(50)
        (executed,) = [e for e in entries if e.event == "tool_executed"]
        assert executed.fields["tool"] == "test.leak" and executed.fields["server"] == "test"
