"""Admin hooks without processes: the policy file's `[hooks.<name>]` (mistakes named by their
key), how an answer is read (bare, OPA's envelope, malformed), and how answers combine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.policy_text import as_json, render_policy
from bot.policy_file import PolicyFileError, load_policy_file
from bot.wiring import TOOL_NAMES
from runtime.hooks.answer import HookAnswer, HookFailure, parse_answer
from runtime.hooks.judge import combine
from runtime.hooks.transport import command_env
from runtime.policy.model import HookConfig
from runtime.policy.resolve import Defaults, ScopedHook, resolve

COMMAND = '[hooks.tickets]\ncommand = ["/usr/local/bin/check-ticket"]\n'


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "clawgate.toml"
    path.write_text(text)
    return load_policy_file(path, TOOL_NAMES)


def test_hooks_load_per_scope_and_apply_to_the_conversations_under_it(tmp_path: Path) -> None:
    document = load(
        tmp_path,
        COMMAND
        + 'tools = ["bash"]\ntimeout = 2\ncache_seconds = 30\nenv = ["TICKETS_TOKEN"]\n'
        + '[conversations."slack:T1".hooks.opa]\nurl = "http://127.0.0.1:8181/v1/data/cg"\n'
        + 'headers = {Authorization = "${OPA_AUTH}"}\n',
    )
    hook = document.hooks["tickets"]
    assert hook.command == ["/usr/local/bin/check-ticket"] and hook.tools == ["bash"]
    assert (hook.timeout, hook.cache_seconds, hook.env) == (2, 30, ["TICKETS_TOKEN"])
    defaults = Defaults(enabled=TOOL_NAMES)
    chat = resolve(document, {}, "slack:T1:C1", defaults, TOOL_NAMES)
    assert [(h.name, h.scope) for h in chat.hooks] == [("tickets", ""), ("opa", "slack:T1")]
    assert [h.name for h in chat.hooks_for("read")] == ["opa"]  # tickets checks bash only
    elsewhere = resolve(document, {}, "feishu:t:oc", defaults, TOOL_NAMES)
    assert [h.name for h in elsewhere.hooks] == ["tickets"]
    assert resolve(load(tmp_path, ""), {}, "slack:T1:C1", defaults, TOOL_NAMES).hooks == ()
    disabled = load(tmp_path, COMMAND + "enabled = false\n")
    assert resolve(disabled, {}, "slack:T1:C1", defaults, TOOL_NAMES).hooks == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[hooks.x]\ntools = []\n", r"hooks\.x: a hook has either a command or a url"),
        (COMMAND + 'url = "http://h/"\n', r"hooks\.tickets: a hook has either a command or a url"),
        ("[hooks.x]\ncommand = []\n", r"hooks\.x\.command: List should have at least 1 item"),
        ('[hooks.x]\nurl = "ftp://h/"\n', r"hooks\.x\.url: expected an http:// or https://"),
        (COMMAND + "timeout = 0\n", r"hooks\.tickets\.timeout: Input should be greater than 0"),
        (COMMAND + "timeout = 600\n", r"hooks\.tickets\.timeout: .*less than or equal to 60"),
        (COMMAND + "cache_seconds = -1\n", r"hooks\.tickets\.cache_seconds: .*greater than"),
        (
            COMMAND + "comand = 1\n",
            r"hooks\.tickets\.comand: no such key here; did you mean hooks\.tickets\.command\?",
        ),
        (COMMAND + 'headers = {A = "b"}\n', r"hooks\.tickets: headers are for a url hook"),
        ('[hooks.x]\nurl = "http://h/"\nenv = ["A"]\n', r"hooks\.x: env is for a command"),
        ('[hooks."a b"]\ncommand = ["x"]\n', r"hooks: hook names are letters"),
        (
            COMMAND + '[conversations."slack".hooks.tickets]\ncommand = ["y"]\n',
            r"the hook name 'tickets' is configured twice",
        ),
        (COMMAND + 'tools = ["bsh"]\n', r"unknown tools bsh"),
    ],
)
def test_a_mistake_in_a_hook_is_named_by_its_key(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(PolicyFileError, match=problem):
        load(tmp_path, text)


@pytest.mark.parametrize(
    ("body", "decision", "reason", "quorum", "route"),
    [
        (b'"deny"', "deny", "", 1, []),
        (b'{"result": "allow"}', "allow", "", 1, []),  # OPA, a string rule
        (
            b'{"result": {"decision": "ask", "reason": "r", "quorum": 3, "route": ["dm"]}}',
            "ask",
            "r",
            3,
            ["dm"],
        ),
        (b'{"decision": "deny", "reason": "freeze", "extra": 1}', "deny", "freeze", 1, []),
    ],
)
def test_an_answer_is_read_bare_or_in_opa_s_envelope(
    body: bytes, decision: str, reason: str, quorum: int, route: list[str]
) -> None:
    answer = parse_answer(body)
    assert (answer.decision, answer.reason, answer.quorum, answer.route) == (
        decision,
        reason,
        quorum,
        route,
    )


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "answered no JSON (nothing)"),
        (b"ok!", "answered no JSON ('ok!')"),
        (b"{}", "answered without a decision or a result"),
        (b'{"result": null}', "answered null, not a decision"),
        (b'"yes"', "decision: Input should be 'allow', 'ask' or 'deny'"),
        (b'{"decision": "ask", "quorum": 9}', "quorum: Input should be less than or equal to 5"),
        (b'{"decision": "ask", "route": ["#ops"]}', "route: Value error, expected conversation"),
        (b"\xff\xfe", "answered no JSON"),
    ],
)
def test_a_malformed_answer_is_a_failure_that_says_why(body: bytes, why: str) -> None:
    with pytest.raises(HookFailure, match=r"^answered") as failed:
        parse_answer(body)
    assert why in str(failed.value)


def test_a_reason_is_shown_on_one_line_capped_with_secrets_masked() -> None:
    token = "ghp_" + "a" * 36
    answer = HookAnswer(decision="deny", reason=f"token {token}\nsecond line " + "x" * 400)
    shown = answer.shown_reason()
    assert token not in shown and "\n" not in shown and len(shown) <= 300


def _hook(name: str) -> ScopedHook:
    return ScopedHook(name, "", HookConfig(command=["x"]))


def test_the_strictest_answer_wins_and_a_failure_asks() -> None:
    allow, ask, deny = (HookAnswer(decision=d, reason=d) for d in ("allow", "ask", "deny"))
    both = combine([(_hook("a"), allow), (_hook("b"), allow)])
    assert both.decision == "allow" and both.allowed_by == ("a", "b")
    assert both.names == "a,b"  # as a trace names the hooks that decided
    failed = combine([(_hook("a"), allow), (_hook("b"), HookFailure("exited with status 1"))])
    assert failed.decision == "ask"
    assert failed.reasons == ("hook b failed (exited with status 1); a human decides",)
    denied = combine([(_hook("a"), ask), (_hook("b"), deny), (_hook("c"), HookFailure("x"))])
    assert denied.decision == "deny" and denied.reasons == ("hook b refuses it: deny",)
    assert denied.names == "b"
    quorum = [
        (_hook("a"), HookAnswer(decision="ask", quorum=2, route=["slack:T:C1"])),
        (_hook("b"), HookAnswer(decision="ask", quorum=3, route=["dm", "slack:T:C1"])),
    ]
    asked = combine(quorum)
    assert (asked.quorum, asked.routes) == (3, ("slack:T:C1", "dm"))
    assert asked.reasons == ("hook a asks for approval", "hook b asks for approval")


def test_a_command_hook_gets_none_of_clawgate_s_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("TICKETS_TOKEN", "t")
    env = command_env(["TICKETS_TOKEN", "UNSET_VAR"])
    assert set(env) == {"PATH", "LANG", "TICKETS_TOKEN"}
    assert "xoxb-secret" not in json.dumps(env)


def test_policy_show_lists_the_hooks_that_apply_with_secrets_masked(tmp_path: Path) -> None:
    document = load(
        tmp_path,
        '[hooks.tickets]\ncommand = ["check", "--token", "ghp_' + "b" * 36 + '"]\n'
        'tools = ["bash"]\ncache_seconds = 60\n'
        '[conversations."slack:T1".hooks.opa]\nurl = "https://u:hunter2@opa.internal/v1/data"\n',
    )
    defaults = Defaults(enabled=TOOL_NAMES)
    shown = render_policy(resolve(document, {}, "slack:T1:C1", defaults, TOOL_NAMES))
    hooks = shown.split("Hooks (the strictest answer wins; a failure asks):\n", 1)[1]
    tickets, opa = hooks.splitlines()
    assert tickets.startswith("  tickets: command check --token ")
    assert "checks bash; timeout 5 s, answers kept 60 s (policy file [global])" in tickets
    assert opa.startswith("  opa: POST https://u:") and "opa.internal/v1/data" in opa
    assert "checks every tool" in opa and "(policy file [slack:T1])" in opa
    assert "ghp_bbbb" not in shown and "hunter2" not in shown
    listed = json.loads(as_json(resolve(document, {}, "slack:T1:C1", defaults, TOOL_NAMES)))
    assert [(h["name"], h["scope"]) for h in listed["hooks"]] == [
        ("tickets", "global"),
        ("opa", "slack:T1"),
    ]
    elsewhere = render_policy(resolve(document, {}, "feishu:t:c", defaults, ()))
    assert "  opa:" not in elsewhere
    assert render_policy(resolve(load(tmp_path, ""), {}, "x:y", defaults, ())).endswith(
        "Hooks: none"
    )
