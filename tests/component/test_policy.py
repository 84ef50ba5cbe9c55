"""The layered tool policy: precedence (file vs override vs default, conversation vs global,
deny wins), admins' changes from chat and the CLI, hot reload, and what the model is offered."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from bot.cli import main
from bot.policy_file import PolicyFileError, load_policy_file
from bot.policy_reload import PolicyReloader
from runtime.approval.grants import GrantTerms
from runtime.approval.models import ApprovalStatus
from runtime.audit import AuditLog
from runtime.channel import ApprovalRequested, ToolFinished
from runtime.models import Actor, ConversationRef, StopReason, ToolStatus
from runtime.policy import service as service_module
from runtime.policy.model import Choice, Override, PolicyDocument
from runtime.policy.resolve import Defaults, resolve
from runtime.policy.service import PolicyChangeError, PolicyService
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.store.keys import Keys
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, PREFIX, TOOLS, make_policies, make_runtime

ALICE = Actor(platform="slack", user_id="UALICE")
CHAT = ConversationRef(platform="slack", id="slack:T1:C1")
OTHER_CHAT = ConversationRef(platform="slack", id="slack:T1:C2")
DEFAULTS = Defaults(enabled=TOOLS, admins=frozenset({ADMIN.key}), approval_timeout=3600)


def doc(toml: str) -> PolicyDocument:
    import tomllib  # noqa: PLC0415

    return PolicyDocument.model_validate(tomllib.loads(toml))


def effective(document: PolicyDocument, conversation: str, overrides: dict | None = None):  # type: ignore[no-untyped-def, type-arg]
    return resolve(document, overrides or {}, conversation, DEFAULTS, TOOLS)


def override(state: str, by: str = "slack:UADMIN") -> Override:
    return Override.model_validate({"state": state, "by": by, "at": 1_700_000_000_000})


def openai(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)


def offered(request: dict) -> list[str]:  # type: ignore[type-arg]
    return [tool["function"]["name"] for tool in request.get("tools", [])]


# -- precedence (pure) --------------------------------------------------------------------------


def test_defaults_allow_every_enabled_tool_and_say_so() -> None:
    policy = effective(PolicyDocument(), "slack:T1:C1")
    assert policy.offered == set(TOOLS)
    assert policy.verdict("bash").source == "default: CLAWGATE_ENABLED_TOOLS"
    assert policy.approval_timeout == 3600
    assert policy.sources["timeout"] == "CLAWGATE_APPROVAL_TIMEOUT"
    assert policy.sources["admins"] == "CLAWGATE_ADMINS"


def test_a_tool_outside_the_enabled_tools_is_off_whatever_allows_it() -> None:
    defaults = Defaults(enabled=("read",))
    document = doc('[tools]\nallow = ["read", "bash"]\n')
    policy = resolve(document, {"": {"bash": override("allow")}}, "slack:T1:C1", defaults, TOOLS)
    assert policy.verdict("bash").state == "off"
    assert policy.offered == {"read"}


def test_the_most_specific_allow_list_wins_and_only_where_it_matches() -> None:
    document = doc(
        '[tools]\nallow = ["read", "write", "edit", "bash"]\n'
        '[conversations."slack:T1".tools]\nallow = ["read", "bash"]\n'
        '[conversations."slack:T1:C1".tools]\nallow = ["read"]\n'
    )
    chat = effective(document, "slack:T1:C1")
    assert chat.offered == {"read"}
    assert chat.verdict("bash").source == "not in the allow list of policy file [slack:T1:C1]"
    assert effective(document, "slack:T1:C2").offered == {"read", "bash"}
    # A prefix is matched on whole parts: slack:T10 is another workspace.
    assert effective(document, "slack:T10:C1").offered == set(TOOLS)
    assert effective(document, "feishu:t1:oc_1").offered == set(TOOLS)


def test_deny_wins_over_allow_at_every_level() -> None:
    document = doc(
        '[tools]\ndeny = ["bash"]\n'
        '[conversations."slack:T1:C1".tools]\nallow = ["read", "bash"]\ndeny = ["write"]\n'
        '[conversations."slack".tools]\nallow = ["read", "write", "edit", "bash"]\n'
    )
    overrides = {"slack:T1:C1": {"bash": override("allow"), "write": override("allow")}}
    policy = effective(document, "slack:T1:C1", overrides)
    assert policy.verdict("bash").state == "deny"
    assert policy.verdict("bash").source == "policy file [global]"
    assert policy.verdict("write").state == "deny"
    assert policy.verdict("write").source == "policy file [slack:T1:C1]"
    # Same scope, same layer: one tool in both lists is denied.
    both = doc('[tools]\nallow = ["bash"]\ndeny = ["bash"]\n')
    assert effective(both, "slack:T1:C1").verdict("bash").state == "deny"


def test_an_override_sits_above_the_file_at_its_scope() -> None:
    document = doc('[tools]\nallow = ["read"]\n')
    overrides = {"slack:T1:C1": {"write": override("allow")}}
    chat = effective(document, "slack:T1:C1", overrides)
    assert chat.verdict("write").state == "allow"
    assert chat.verdict("write").source.startswith("override [slack:T1:C1] by slack:UADMIN")
    assert effective(document, "slack:T1:C2", overrides).verdict("write").state == "deny"
    # An override deny anywhere wins, like a file deny.
    denied = effective(PolicyDocument(), "slack:T1:C1", {"slack": {"read": override("deny")}})
    assert denied.verdict("read").state == "deny"
    assert "read" not in denied.offered


def test_ask_adds_up_and_scalars_come_from_the_most_specific_scope() -> None:
    document = doc(
        '[tools]\nask = ["write"]\n'
        '[approvals]\nrequester_may_approve = true\ntimeout = 600\nadmins = ["slack:UBOSS"]\n'
        '[risk]\nask_patterns = ["deploy"]\nlarge_deletion_lines = 50\n'
        '[conversations."slack:T1:C1".tools]\nask = ["edit"]\n'
        '[conversations."slack:T1:C1".approvals]\nrequester_may_approve = false\n'
        'approvers = ["slack:UCAROL"]\n'
        '[conversations."slack:T1:C1".risk]\nask_patterns = ["release"]\n'
        "large_deletion_lines = 5\n"
    )
    chat = effective(document, "slack:T1:C1")
    assert chat.verdict("write").state == "ask" and chat.verdict("edit").state == "ask"
    assert {"write", "edit"} <= chat.offered  # asking tools are still offered
    assert chat.requester_may_approve is False
    assert chat.sources["requester_may_approve"] == "policy file [slack:T1:C1]"
    assert chat.approval_timeout == 600
    assert chat.admins == {ADMIN.key, "slack:UBOSS"}
    assert chat.approvers == {"slack:UCAROL"}
    assert chat.risk.ask_patterns == ["deploy", "release"]
    assert chat.risk.large_deletion_lines == 5
    other = effective(document, "slack:T1:C2")
    assert other.verdict("edit").state == "allow" and other.requester_may_approve is True
    assert other.approvers == frozenset() and other.risk.large_deletion_lines == 50


def test_policy_file_mistakes_are_named_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text(
        '[tools]\ndeny = ["bsh"]\n[conversations."slack:T1 C1".tools]\nallow = []\n'
        '[conversations."slack:T1".approvals]\napprovers = ["carol"]\ntimeout = -1\n'
    )
    with pytest.raises(PolicyFileError) as raised:
        load_policy_file(path, TOOLS)
    lines = str(raised.value).splitlines()
    assert any("invalid scope 'slack:T1 C1'" in line for line in lines), lines
    assert any("approvals.approvers" in line and "carol" in line for line in lines), lines
    assert any("approvals.timeout" in line for line in lines), lines
    path.write_text('[tools]\ndeny = ["bsh"]\n')
    with pytest.raises(PolicyFileError, match="unknown tools bsh"):
        load_policy_file(path, TOOLS)


# -- changes through the service ----------------------------------------------------------------


async def test_admins_change_a_tool_others_are_refused_and_everything_is_audited(
    redis: aioredis.Redis,
) -> None:
    policies = make_policies(redis)
    audit = AuditLog(redis, Keys(PREFIX))

    with pytest.raises(PolicyChangeError, match="only admins may change the policy"):
        await policies.change(CHAT.id, "bash", "deny", ALICE)
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "allow"

    said = await policies.change(CHAT.id, "bash", "deny", ADMIN)
    assert "bash in slack:T1:C1: now denied" in said and "was allowed" in said
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "deny"
    assert (await policies.effective(OTHER_CHAT.id)).verdict("bash").state == "allow"
    stored = await redis.hgetall(f"{PREFIX}:policy:overrides")
    assert json.loads(stored["slack:T1:C1\x1fbash"])["by"] == ADMIN.key

    with pytest.raises(PolicyChangeError, match="unknown tool 'bsh'"):
        await policies.change(CHAT.id, "bsh", "deny", ADMIN)
    await policies.change("", "write", "deny", ADMIN)  # global
    with pytest.raises(PolicyChangeError, match="write stays denied in slack:T1:C1"):
        await policies.change(CHAT.id, "write", "allow", ADMIN)
    assert "nothing to reset" in await policies.change(CHAT.id, "write", None, ADMIN)
    await policies.change(CHAT.id, "bash", None, ADMIN)
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "allow"

    entries = [e for e in await audit.newest(50) if e.event.startswith("policy")]
    kinds = [(e.event, e.actor, e.fields.get("tool"), e.fields.get("new")) for e in entries]
    assert kinds == [
        ("policy_refused", ALICE.key, "bash", "deny"),
        ("policy_changed", ADMIN.key, "bash", "deny"),
        ("policy_refused", ADMIN.key, "bsh", "deny"),
        ("policy_changed", ADMIN.key, "write", "deny"),
        ("policy_refused", ADMIN.key, "write", "allow"),
        ("policy_changed", ADMIN.key, "bash", "reset"),
    ]
    first_change = entries[1].fields
    assert first_change["scope"] == "slack:T1:C1" and first_change["old"] == "none"
    assert "only admins may change the policy" in entries[0].fields["why"]
    assert "write stays denied" in entries[4].fields["why"]


async def test_an_unreadable_override_counts_as_a_deny(redis: aioredis.Redis) -> None:
    policies = make_policies(redis)
    await redis.hset(f"{PREFIX}:policy:overrides", "slack:T1:C1\x1fread", "not json")
    assert (await policies.effective(CHAT.id)).verdict("read").state == "deny"


class _Catalog:
    """MCP tools that come and go (runtime.policy.service.ToolCatalog)."""

    def __init__(self) -> None:
        self.listed: list[str] = []

    def names(self) -> list[str]:
        return self.listed

    async def settled(self) -> None:
        return None


async def test_a_policy_is_resolved_once_while_its_inputs_stay_and_again_when_one_changes(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolved: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        resolved.append(args[2])  # the conversation
        return resolve(*args, **kwargs)

    monkeypatch.setattr(service_module, "resolve", spy)
    policies = make_policies(redis)
    catalog = policies.catalog = _Catalog()
    first = await policies.effective(CHAT.id)
    # The same replies from Redis, and the message's access check (no overrides, no choices).
    assert await policies.effective(CHAT.id) is first
    assert await policies.admit(ALICE, CHAT) is None
    assert resolved == [CHAT.id]
    assert await policies.effective(CHAT.id, also_enabled=("read",)) is not first
    assert len(resolved) == 2

    # Each input changed is seen on the next read: an override (as another process sets it),
    # a choice, a new file, a new MCP tool.
    overrides = f"{PREFIX}:policy:overrides"
    await redis.hset(overrides, f"{CHAT.id}\x1fbash", override("deny").model_dump_json())
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "deny"
    assert (await policies.effective(OTHER_CHAT.id)).verdict("bash").state == "allow"
    mode = Choice(value="ask", by=ADMIN.key, at=1_700_000_000_000)
    await redis.hset(policies.keys.choices(CHAT.id), "mode", mode.model_dump_json())
    assert (await policies.effective(CHAT.id)).mode == "ask"
    await redis.hdel(overrides, f"{CHAT.id}\x1fbash")
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "allow"
    assert await policies.replace(doc('[access]\nusers = ["slack:UBOB"]\n'), "test")
    assert await policies.admit(ALICE, CHAT) is not None
    catalog.listed = ["github.search"]
    assert "github.search" in (await policies.effective(CHAT.id)).tools
    assert len(resolved) == 8
    assert (await policies.effective(CHAT.id)).mode == "ask"  # the cached one, still right
    assert len(resolved) == 8


# -- what the model sees and what runs ------------------------------------------------------------


async def test_policy_deny_in_chat_hides_the_tool_and_refuses_a_forced_call(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """The acceptance scenario: an admin types /policy deny bash in a conversation."""
    (workdir / "victim.txt").write_text("precious")
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai))
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    await dispatch(runtime, "s1", "/policy deny bash", ALICE, CHAT, say)
    assert told[-1].startswith("Policy not changed: only admins may change the policy")
    await dispatch(runtime, "s1", "/policy deny bash", ADMIN, CHAT, say)
    assert "bash in slack:T1:C1: now denied" in told[-1]

    # The model there is no longer offered bash; it forces a call anyway: denied, nothing ran.
    fake_openai.script = [
        calls(("call_1", "bash", {"command": "rm victim.txt"})),
        reply("ok"),
    ]
    result = await runtime.run("s1", "delete victim.txt", ALICE, CHAT)
    assert result.stop_reason is StopReason.FINAL
    assert "bash" not in offered(fake_openai.requests[0])
    assert set(offered(fake_openai.requests[0])) == {"read", "write", "edit"}
    assert (workdir / "victim.txt").read_text() == "precious"
    (finished,) = [e for e in channel.of(ToolFinished) if e.tool == "bash"]
    assert finished.status is ToolStatus.DENIED
    denial = fake_openai.requests[1]["messages"][-1]["content"]
    assert "tool 'bash' is denied here by policy: override [slack:T1:C1] by slack:UADMIN" in denial
    assert not channel.of(ApprovalRequested)

    # Another conversation is untouched.
    fake_openai.script = [reply("hi")]
    await runtime.run("s2", "hello", ALICE, OTHER_CHAT)
    assert "bash" in offered(fake_openai.requests[-1])

    # /policy show explains it, to anyone.
    await dispatch(runtime, "s1", "/policy show", ALICE, CHAT, say)
    shown = told[-1]
    assert "Policy for slack:T1:C1" in shown
    assert "the model is offered: read, write, edit" in shown
    bash_line = next(line for line in shown.splitlines() if line.strip().startswith("bash"))
    assert "denied" in bash_line and "override [slack:T1:C1] by slack:UADMIN" in bash_line
    assert "admins: slack:UADMIN (CLAWGATE_ADMINS)" in shown

    # The audit trail shows who changed it.
    entries = await runtime.audit.newest(100)
    changed = [e for e in entries if e.event == "policy_changed"]
    assert [(e.actor, e.fields["tool"], e.fields["new"]) for e in changed] == [
        (ADMIN.key, "bash", "deny")
    ]


async def test_a_deny_made_while_a_call_waits_wins_over_the_approval(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "victim.txt").write_text("precious")
    fake_openai.script = [calls(("call_1", "bash", {"command": "rm victim.txt"})), reply("ok")]
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai))
    asked = await runtime.run("s1", "delete it", ALICE, CHAT)
    assert asked.approval_id is not None
    await runtime.policies.change(CHAT.id, "bash", "deny", ADMIN)

    decision = await runtime.decide(asked.approval_id, True, ADMIN, CHAT)

    assert decision.accepted
    assert (workdir / "victim.txt").read_text() == "precious"
    answer = fake_openai.requests[-1]["messages"][-1]["content"]
    assert "denied here by policy" in answer


async def test_always_ask_tools_ask_even_when_the_risk_rules_would_not(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "notes.txt").write_text("hello")
    document = doc('[conversations."slack:T1:C1".tools]\nask = ["read"]\n')
    fake_openai.script = [calls(("call_1", "read", {"path": "notes.txt"})), reply("read it")]
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai), document=document)
    asked = await runtime.run("s1", "read notes", ALICE, CHAT)
    assert asked.stop_reason is StopReason.APPROVAL_REQUIRED
    (requested,) = channel.of(ApprovalRequested)
    assert requested.notice.reasons[0] == (
        "read always asks for approval here (always asks: policy file [slack:T1:C1])"
    )
    assert "read" in offered(fake_openai.requests[0])
    # "Always" adds no standing rule for such a tool: the next read asks again.
    assert asked.approval_id is not None
    decision = await runtime.decide(asked.approval_id, True, ADMIN, CHAT, always=GrantTerms())
    assert decision.accepted and "the policy says read always asks here" in decision.message
    assert not [k async for k in redis.scan_iter(f"{PREFIX}:rules:*")]
    fake_openai.script = [calls(("call_3", "read", {"path": "notes.txt"})), reply("again")]
    again = await runtime.run("s1", "read notes again", ALICE, CHAT)
    assert again.stop_reason is StopReason.APPROVAL_REQUIRED
    # Elsewhere reads run at once.
    fake_openai.script = [calls(("call_2", "read", {"path": "notes.txt"})), reply("done")]
    elsewhere = await runtime.run("s2", "read notes", ALICE, OTHER_CHAT)
    assert elsewhere.stop_reason is StopReason.FINAL


async def test_conversation_approvers_and_timeout_come_from_its_scope(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    carol = Actor(platform="slack", user_id="UCAROL")
    document = doc(
        '[conversations."slack:T1:C1".approvals]\napprovers = ["slack:UCAROL"]\ntimeout = 120\n'
    )
    fake_openai.script = [calls(("call_1", "bash", {"command": "rm a"})), reply("ok")]
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai), document=document)
    asked = await runtime.run("s1", "rm a", ALICE, CHAT)
    assert asked.approval_id is not None
    loaded = await runtime.approvals.load(asked.approval_id)
    assert loaded is not None
    record = loaded[0]
    assert record.expires_at - record.created_at == 120_000

    fake_openai.script = [calls(("call_2", "bash", {"command": "rm b"})), reply("ok")]
    other = await runtime.run("s2", "rm b", ALICE, OTHER_CHAT)
    assert other.approval_id is not None
    refused = await runtime.decide(other.approval_id, True, carol, OTHER_CHAT)
    assert not refused.accepted and "not an approver" in refused.message

    accepted = await runtime.decide(asked.approval_id, False, carol, CHAT, reason="no")
    assert accepted.accepted
    loaded = await runtime.approvals.load(asked.approval_id)
    assert loaded is not None and loaded[0].status is ApprovalStatus.REJECTED


# -- hot reload -----------------------------------------------------------------------------------


async def test_the_file_is_reloaded_on_change_and_an_invalid_file_keeps_the_old_policy(
    redis: aioredis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text('[tools]\ndeny = ["bash"]\n')
    policies = make_policies(redis, document=load_policy_file(path, TOOLS))
    reloader = PolicyReloader(policies, path)
    watcher = asyncio.create_task(reloader.watch(interval=0.05))
    try:
        assert (await policies.effective(CHAT.id)).verdict("bash").state == "deny"

        path.write_text('[tools]\ndeny = ["write"]\n')
        for _ in range(100):
            if (await policies.effective(CHAT.id)).verdict("bash").state == "allow":
                break
            await asyncio.sleep(0.02)
        assert (await policies.effective(CHAT.id)).verdict("write").state == "deny"
        assert (await policies.effective(CHAT.id)).verdict("bash").state == "allow"

        path.write_text('[tools]\ndeny = ["write"\n')  # broken TOML
        for _ in range(100):
            if errors := [r for r in caplog.records if r.levelno == logging.ERROR]:
                break
            await asyncio.sleep(0.02)
        (record,) = errors
        assert "policy file rejected, the previous policy stays" in record.getMessage()
        assert str(path) in record.getMessage()
        assert (await policies.effective(CHAT.id)).verdict("write").state == "deny"
    finally:
        watcher.cancel()

    entries = [e for e in await AuditLog(redis, Keys(PREFIX)).newest(10)]
    reloads = [e for e in entries if e.event == "policy_reloaded"]
    assert len(reloads) == 1 and reloads[0].actor == "policy file (changed)"


async def until_policy(policies: PolicyService, tool: str, state: str) -> None:
    for _ in range(200):
        if (await policies.effective(CHAT.id)).verdict(tool).state == state:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{tool} never became {state}")


async def test_a_policy_file_that_appears_after_the_start_is_loaded_and_one_that_goes_stays(
    redis: aioredis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.policy_reload")
    path = tmp_path / "clawgate.toml"  # absent at start: the built-in defaults
    policies = make_policies(redis)
    work = tmp_path / "work"
    work.mkdir()
    reloader = PolicyReloader(policies, path, optional=True, workdir=work)
    watcher = asyncio.create_task(reloader.watch(interval=0.05))
    try:
        await asyncio.sleep(0.2)
        assert not caplog.records  # absent, as it was at start: nothing to say
        path.write_text('[tools]\ndeny = ["bash"]\n')
        await until_policy(policies, "bash", "deny")
        appeared = f"policy file {path} reloaded (appeared)"
        for _ in range(100):  # said once the swap is audited, just after it
            if appeared in caplog.messages:
                break
            await asyncio.sleep(0.02)
        assert appeared in caplog.messages
        path.unlink()
        await asyncio.sleep(0.3)
        assert (await policies.effective(CHAT.id)).verdict("bash").state == "deny"  # stays
        gone = [m for m in caplog.messages if "is gone" in m]
        assert gone == [
            f"the policy file {path} is gone: the policy loaded from it stays in force "
            "(restart for the built-in defaults)"
        ]
    finally:
        watcher.cancel()


async def test_a_policy_file_appearing_inside_the_work_dir_is_refused(
    redis: aioredis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As at start: an approved command could have written it (admins, safe programs)."""
    caplog.set_level(logging.WARNING, logger="bot.policy_reload")
    path = tmp_path / "clawgate.toml"
    policies = make_policies(redis)
    reloader = PolicyReloader(policies, path, optional=True, workdir=tmp_path)
    watcher = asyncio.create_task(reloader.watch(interval=0.05))
    try:
        path.write_text('[tools]\nask = ["read"]\n')
        for _ in range(100):
            if caplog.records:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        (said,) = caplog.messages
        assert said.startswith(f"a policy file appeared at {path}: not loaded, ")
        assert (await policies.effective(CHAT.id)).verdict("read").state == "allow"
    finally:
        watcher.cancel()


def test_policy_file_errors_name_the_line_the_key_and_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text(
        '[tools]\nalow = ["read"]\n\n[approvals]\ntimeout = "soon"\n\n'
        '[conversations."slack:T1".risk]\nsafe_program = ["yq"]\n'
    )
    with pytest.raises(PolicyFileError) as raised:
        load_policy_file(path, TOOLS)
    assert str(raised.value).splitlines() == [
        f"{path}:2: tools.alow: no such key here; did you mean tools.allow?",
        f"{path}:5: approvals.timeout: Input should be a valid number, unable to parse string "
        "as a number",
        f'{path}:8: conversations."slack:T1".risk.safe_program: no such key here; did you '
        'mean conversations."slack:T1".risk.safe_programs?',
    ]


async def test_sighup_reloads_the_file(redis: aioredis.Redis, tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text("")
    policies = make_policies(redis, document=load_policy_file(path, TOOLS))
    reloader = PolicyReloader(policies, path)
    reloader.on_sighup()
    try:
        path.write_text('[tools]\ndeny = ["edit"]\n')
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(100):
            if (await policies.effective(CHAT.id)).verdict("edit").state == "deny":
                break
            await asyncio.sleep(0.02)
        assert (await policies.effective(CHAT.id)).verdict("edit").state == "deny"
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)


# -- the CLI --------------------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, tmp_path: Path) -> Path:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CLAWGATE_REDIS_PREFIX", PREFIX)
    monkeypatch.setenv("CLAWGATE_ADMINS", ADMIN.key)
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "clawgate.toml"
    policy.write_text('[conversations."slack:T1".tools]\nask = ["write"]\n')
    monkeypatch.setenv("CLAWGATE_POLICY_FILE", str(policy))
    return policy


async def test_cli_changes_and_shows_the_policy(
    redis: aioredis.Redis, cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await asyncio.to_thread(main, ["policy", "deny", "bash", "--conversation", CHAT.id])
    assert code == 0
    assert "bash in slack:T1:C1: now denied" in capsys.readouterr().out

    code = await asyncio.to_thread(main, ["policy", "show", "--conversation", CHAT.id])
    out = capsys.readouterr().out
    assert code == 0
    assert "override [slack:T1:C1] by operator:" in out
    write_line = next(line for line in out.splitlines() if line.strip().startswith("write"))
    assert "always asks" in write_line and "policy file [slack:T1]" in write_line

    code = await asyncio.to_thread(main, ["policy", "show", "--json", "--conversation", CHAT.id])
    shown = json.loads(capsys.readouterr().out)
    assert shown["tools"]["bash"]["state"] == "deny"
    assert shown["offered"] == ["clarify", "edit", "read", "send_file", "write"]  # bash denied

    code = await asyncio.to_thread(main, ["policy", "show"])
    assert code == 0 and "Policy for global" in capsys.readouterr().out

    code = await asyncio.to_thread(main, ["policy", "reset", "bash", "--conversation", CHAT.id])
    assert code == 0
    assert not await redis.hgetall(f"{PREFIX}:policy:overrides")
    entries = await AuditLog(redis, Keys(PREFIX)).newest(10)
    assert [e.fields["new"] for e in entries if e.event == "policy_changed"] == ["deny", "reset"]
    assert all(e.actor.startswith("operator:") for e in entries if e.event == "policy_changed")


async def test_cli_errors_are_one_line_and_exit_non_zero(
    cli_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for argv, message in (
        (["policy", "deny", "bsh"], "clawgate: unknown tool 'bsh'; tools: read, write, edit, bash"),
        (["policy", "deny", "bash", "--conversation", "slack:T1 C1"], "invalid scope"),
    ):
        code = await asyncio.to_thread(main, argv)
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert message in err
    code = await asyncio.to_thread(main, ["policy", "show", "--conversation", "slack T1"])
    assert code == 2 and "invalid scope" in capsys.readouterr().err
    cli_env.write_text('[tools]\ndeny = ["bsh"]\n')
    code = await asyncio.to_thread(main, ["policy", "show"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown tools bsh" in err
    monkeypatch.delenv("REDIS_URL")
    cli_env.write_text("")
    code = await asyncio.to_thread(main, ["policy", "allow", "bash"])
    assert code == 2 and "REDIS_URL: required" in capsys.readouterr().err


async def test_an_admin_of_one_chat_cannot_undo_a_wider_admins_decision(
    redis: aioredis.Redis,
) -> None:
    chat_admin = Actor(platform="slack", user_id="UCHAT")
    operator = Actor(platform="operator", user_id="root")
    document = doc(
        '[tools]\nallow = ["read", "write", "edit"]\n'
        '[conversations."slack:T1:C1".approvals]\nadmins = ["slack:UCHAT"]\n'
    )
    policies = make_policies(redis, document=document)
    assert policies.reach(chat_admin, CHAT.id) == CHAT.id
    assert policies.reach(chat_admin, OTHER_CHAT.id) is None
    assert policies.reach(operator, CHAT.id) == ""

    # Denying is always allowed; so is undoing one's own deny.
    await policies.change(CHAT.id, "edit", "deny", chat_admin)
    await policies.change(CHAT.id, "edit", None, chat_admin)
    with pytest.raises(PolicyChangeError, match="only admins may change the policy"):
        await policies.change(OTHER_CHAT.id, "edit", "deny", chat_admin)

    # The operator's deny in this chat: the chat admin may neither lift nor reset it.
    await policies.change(CHAT.id, "write", "deny", operator)
    for state in ("allow", None):
        with pytest.raises(PolicyChangeError, match="by operator:root, an admin of global"):
            await policies.change(CHAT.id, "write", state, chat_admin)
    assert (await policies.effective(CHAT.id)).verdict("write").state == "deny"
    # Denying it again is no way round: the deny keeps the operator's reach.
    await policies.change(CHAT.id, "write", "deny", chat_admin)
    with pytest.raises(PolicyChangeError, match="an admin of global"):
        await policies.change(CHAT.id, "write", None, chat_admin)
    assert (await policies.effective(CHAT.id)).verdict("write").state == "deny"

    # bash is left out of the file's global allow list: a chat admin cannot let it in...
    with pytest.raises(PolicyChangeError, match="as an admin of slack:T1:C1 you may not lift"):
        await policies.change(CHAT.id, "bash", "allow", chat_admin)
    # ...an admin of every conversation can, and the chat admin may then tighten it again.
    await policies.change(CHAT.id, "bash", "allow", ADMIN)
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "allow"
    await policies.change(CHAT.id, "bash", "deny", chat_admin)
    assert (await policies.effective(CHAT.id)).verdict("bash").state == "deny"


def test_safe_tools_never_lift_denials() -> None:
    from runtime.risk.policy import RiskConfig, RiskPolicy, Verdict  # noqa: PLC0415

    policy = RiskPolicy(RiskConfig(safe_tools=["read", "bash"], deny_patterns=["victim"]))
    assert policy.assess("bash", {"command": "rm -rf victim.txt"}).verdict is Verdict.DENY
    assert policy.assess("bash", {"command": "rm -rf /"}).verdict is Verdict.DENY
    assert policy.assess("bash", {"command": "rm notes.txt"}).verdict is Verdict.ALLOW


async def test_a_deny_made_while_the_model_answers_applies_to_its_calls(
    redis: aioredis.Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import loop  # noqa: PLC0415
    from runtime.models import AssistantMessage, ToolCall  # noqa: PLC0415

    monkeypatch.setattr(loop, "POLICY_MAX_AGE", 0.0)  # no need to wait for a slow model
    (workdir / "victim.txt").write_text("precious")
    runtime: Any = None

    class SlowModel:
        name = "slow"
        offline_demo = False
        answered = 0

        async def complete(self, messages: Any, tools: Any) -> AssistantMessage:
            self.answered += 1
            if self.answered > 1:
                return AssistantMessage(content="done")
            await runtime.policies.change(CHAT.id, "bash", "deny", ADMIN)  # while it "thinks"
            command = json.dumps({"command": "rm victim.txt"})
            return AssistantMessage(tool_calls=[ToolCall(id="c1", name="bash", arguments=command)])

    document = doc('[risk]\nsafe_tools = ["read", "bash"]\n')  # bash would run unasked
    runtime, channel = make_runtime(redis, workdir, SlowModel(), document=document)
    result = await runtime.run("s1", "delete it", ALICE, CHAT)
    assert result.stop_reason is StopReason.FINAL
    assert (workdir / "victim.txt").read_text() == "precious"
    (finished,) = channel.of(ToolFinished)
    assert finished.status is ToolStatus.DENIED


async def test_reload_survives_bad_files_and_sees_every_change(
    redis: aioredis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text("")
    policies = make_policies(redis, document=load_policy_file(path, TOOLS))
    # Edited after the start-up read, before the reloader runs: its first check sees it.
    path.write_text('[tools]\ndeny = ["bash"]\n')
    reloader = PolicyReloader(policies, path)
    await reloader.check()
    assert policies.document.tools.deny == ["bash"]

    def errors() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]

    for bad, problem in (
        ('[risk]\nask_patterns = ["x{4294967296}"]\n', "invalid regular expression"),
        ("[approvals]\ntimeout = inf\n", "approvals.timeout"),
        ("[approvals]\ntimeout = 1e16\n", "approvals.timeout"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "policy file rejected"),
        ('[risk]\nsafe_tools = ["raed"]\n', "unknown tools raed"),
    ):
        caplog.clear()
        path.write_text(bad)
        await reloader.check()
        assert any(problem in line for line in errors()), (bad[:40], errors())
        assert policies.document.tools.deny == ["bash"]  # the previous policy stays
        caplog.clear()
        await reloader.check()  # unchanged: not rejected again every poll
        assert not errors()

    # The same size and modification time, other content: still seen.
    path.write_text('[tools]\ndeny = ["edit"]\n')
    await reloader.check()
    stat = path.stat()
    path.write_text('[tools]\ndeny = ["read"]\n')
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    await reloader.check()
    assert policies.document.tools.deny == ["read"]

    # Unreadable (here: a directory in its place), then fixed: the fix is loaded.
    path.unlink()
    path.mkdir()
    await reloader.check()
    assert "cannot read the policy file" in errors()[-1]
    path.rmdir()
    path.write_text('[tools]\ndeny = ["write"]\n')
    await reloader.check()
    assert policies.document.tools.deny == ["write"]


@pytest.mark.parametrize(
    "argv",
    [
        ["approvals", "list"],
        ["approvals", "approve", "abc"],
        ["policy", "show"],
        ["policy", "deny", "bash"],
    ],
)
async def test_an_unreachable_redis_is_a_clear_line_and_exit_1(
    cli_env: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    from tests.conftest import free_port  # noqa: PLC0415

    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    code = await asyncio.to_thread(main, argv)
    captured = capsys.readouterr()
    assert code == 1 and not captured.out
    lines = captured.err.strip().splitlines()
    assert "Traceback" not in captured.err
    assert lines[-1].startswith("clawgate: cannot reach Redis"), lines


def test_the_policy_file_in_the_work_directory_is_locked_against_every_tool_call(
    tmp_path: Path,
) -> None:
    from runtime.risk.policy import RiskConfig, RiskPolicy, Verdict  # noqa: PLC0415

    policy = RiskPolicy(
        RiskConfig(locked_paths=["conf/clawgate.toml"], safe_tools=["read", "bash"])
    )
    for tool, arguments in (
        ("write", {"path": "conf/clawgate.toml", "content": "[tools]\n"}),
        ("write", {"path": "./conf/../conf/clawgate.toml", "content": ""}),
        ("edit", {"path": "/work/conf/clawgate.toml", "old_text": "a", "new_text": "b"}),
        ("bash", {"command": "echo '[tools]' > conf/CLAWGATE.toml"}),
        ("bash", {"command": "sed -i s/deny/allow/ conf/clawgate.tom?"}),
        ("bash", {"command": "cp /tmp/evil ./conf/*.toml"}),
    ):
        decision = policy.assess(tool, arguments)
        assert decision.verdict is Verdict.DENY, (tool, arguments)
        assert "the policy file (admins change it outside clawgate)" in decision.reasons[0]
    assert policy.assess("read", {"path": "conf/clawgate.toml"}).verdict is Verdict.ALLOW
    for command in ("cat conf/clawgate.toml", "grep deny *"):  # reading it stays possible
        assert policy.assess("bash", {"command": command}, tmp_path).verdict is Verdict.ALLOW
    assert policy.assess("write", {"path": "other.toml", "content": ""}).verdict is Verdict.ALLOW


async def test_messages_held_during_a_long_wait_are_kept_as_long_as_the_wait(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    document = doc('[conversations."slack:T1:C1".approvals]\ntimeout = 2592000\n')  # 30 days
    fake_openai.script = [calls(("call_1", "bash", {"command": "rm a"}))]
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai), document=document)
    asked = await runtime.run("s1", "rm a", ALICE, CHAT)
    assert asked.approval_id is not None
    held = await runtime.run("s1", "and then this", ALICE, CHAT)
    assert held.held
    pending_ttl = await redis.pttl(f"{PREFIX}:{{s1}}:pending")
    held_ttl = await redis.pttl(f"{PREFIX}:{{s1}}:held")
    assert pending_ttl > 29 * 86_400_000
    assert held_ttl >= pending_ttl - 1_000


ACCESS = """
[access]
direct_messages = false

[conversations."slack:T1:C1".access]
users = ["slack:UALICE"]
"""


async def test_only_the_people_the_policy_names_may_talk_to_the_bot(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    runtime, channel = make_runtime(redis, workdir, openai(fake_openai), document=doc(ACCESS))
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    bob = Actor(platform="slack", user_id="UBOB")
    assert await dispatch(runtime, "s1", "hello", bob, CHAT, say) is None
    assert told == [
        "Sorry, you cannot use clawgate here: slack:UBOB is not among the people who may use "
        "clawgate here. An admin can change who may (the policy file's [access] table)."
    ]
    assert fake_openai.requests == [] and channel.events == []  # the model was never called
    assert await runtime.history.length("s1") == 0
    trail = await AuditLog(redis, Keys(PREFIX)).newest(10)
    refused = [e for e in trail if e.event == "access_refused"]
    assert [(e.actor, e.fields.get("conversation")) for e in refused] == [
        ("slack:UBOB", "slack:T1:C1")
    ]

    fake_openai.script = [reply("hi alice"), reply("hi admin"), reply("hi bob")]
    alice = Actor(platform="slack", user_id="UALICE")
    assert (await dispatch(runtime, "s1", "hello", alice, CHAT, say)) is not None
    assert (await dispatch(runtime, "s1", "hello", ADMIN, CHAT, say)) is not None  # always
    # Elsewhere everyone may, but direct messages are closed (to all but admins).
    assert (await dispatch(runtime, "s2", "hello", bob, OTHER_CHAT, say)) is not None
    direct = ConversationRef(platform="slack", id="slack:T1:D9", direct=True)
    assert await dispatch(runtime, "s3", "hello", bob, direct, say) is None
    assert "direct messages with clawgate are closed here" in told[-1]
    assert len(fake_openai.requests) == 3
    # /help is for anyone; /pending shows others' commands: only to those with access.
    await dispatch(runtime, "s1", "/help", bob, CHAT, say)
    assert "/approve" in told[-1]
    await dispatch(runtime, "s1", "/pending", bob, CHAT, say)
    assert "Sorry, you cannot use clawgate here" in told[-1]
    await dispatch(runtime, "s1", "/pending", alice, CHAT, say)
    assert told[-1].startswith("No approvals are pending.\nThis conversation's mode: auto")


async def test_aligned_columns_are_a_code_block_in_slack_and_plain_in_the_terminal(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """Slack's font is proportional: /policy's tools and /mode's choices go in a code block
    there; the terminal's is fixed, and shows the same columns without fences."""
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    told: list[str] = []

    async def say(text: str) -> None:
        told.append(text)

    terminal = ConversationRef(platform="console", id="console:local")
    for conversation in (CHAT, terminal):
        for command in ("/policy show", "/mode"):
            await dispatch(runtime, "s1", command, ADMIN, conversation, say)
    slack_policy, slack_mode, plain_policy, plain_mode = told
    table = slack_policy.split("):\n```\n", 1)[1].split("\n```\nApprovals:", 1)[0]
    assert "  bash " in table and "  read " in table, slack_policy
    assert "strictest first" in slack_mode and "\n```\n  plan " in slack_mode
    assert "```" not in plain_policy + plain_mode
    assert "\n  bash " in plain_policy and "\n  plan " in plain_mode


def test_access_is_shown_with_where_it_comes_from() -> None:
    from adapters.policy_text import render_policy  # noqa: PLC0415

    shown = render_policy(effective(doc(ACCESS), "slack:T1:C1"))
    assert "who may use clawgate: slack:UALICE (policy file [slack:T1:C1]); admins always" in shown
    assert "direct messages: closed (policy file [global])" in shown
    everyone = render_policy(effective(doc('[access]\nusers = ["*"]\n'), "slack:T1:C1"))
    assert "who may use clawgate: everyone (policy file [global])" in everyone
    assert "direct messages: open (default: open)" in everyone
