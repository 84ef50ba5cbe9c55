"""parse_command: every chat command form, the namespaced form, and ordinary messages."""

from __future__ import annotations

import pytest

from adapters.commands import Command, CommandError, parse_command
from runtime.approval.grants import GrantTerms


def parsed(text: str) -> Command:
    command = parse_command(text)
    assert command is not None, f"{text!r} was not recognised as a command"
    return command


# --- approve / reject ---------------------------------------------------------------------


def test_approve_defaults_to_once() -> None:
    assert parsed("/approve abc") == Command(name="approve", approval_id="abc", scope="once")


def test_approve_always() -> None:
    assert parsed("/approve abc always") == Command(
        name="approve", approval_id="abc", scope="always", grant=GrantTerms()
    )


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("/approve abc always thread", GrantTerms("thread")),
        ("/approve abc always everywhere for 2h", GrantTerms("everywhere", 7200)),
        ("/approve abc always for 30m", GrantTerms("here", 1800)),
        ("/approve abc ALWAYS HERE FOR 7D", GrantTerms("here", 7 * 86400)),
    ],
)
def test_approve_always_with_a_scope_and_a_duration(text: str, terms: GrantTerms) -> None:
    assert parsed(text) == Command(name="approve", approval_id="abc", scope="always", grant=terms)


@pytest.mark.parametrize(
    "text", ["/approve abc always for", "/approve abc always for 0h", "/approve abc always for 5y"]
)
def test_approve_always_with_a_bad_duration(text: str) -> None:
    with pytest.raises(CommandError, match="usage: /approve"):
        parsed(text)


def test_approve_once() -> None:
    assert parsed("/approve abc once") == Command(name="approve", approval_id="abc", scope="once")


@pytest.mark.parametrize("text", ["/approve", "/approve   "])
def test_approve_without_id(text: str) -> None:
    with pytest.raises(CommandError, match=r"usage: /approve <id> \[once\|always \[thread"):
        parse_command(text)


@pytest.mark.parametrize("text", ["/approve abc sometimes", "/approve abc always please"])
def test_approve_bad_scope(text: str) -> None:
    with pytest.raises(CommandError, match="usage: /approve"):
        parse_command(text)


def test_reject() -> None:
    assert parsed("/reject abc") == Command(name="reject", approval_id="abc", reason=None)


def test_reject_reason_kept_whole() -> None:
    command = parsed("/reject abc too risky today")
    assert command.name == "reject"
    assert command.approval_id == "abc"
    assert command.reason == "too risky today"


def test_reject_without_id() -> None:
    with pytest.raises(CommandError, match=r"usage: /reject <id> \[reason\]"):
        parse_command("/reject")


# --- cancel / pending / help --------------------------------------------------------------


def test_cancel() -> None:
    assert parsed("/cancel") == Command(name="cancel")


def test_cancel_with_argument() -> None:
    with pytest.raises(CommandError, match="/cancel takes no arguments"):
        parse_command("/cancel now")


def test_pending() -> None:
    assert parsed("/pending") == Command(name="pending")


def test_pending_with_argument() -> None:
    with pytest.raises(CommandError, match="/pending takes no arguments"):
        parse_command("/pending all")


def test_help() -> None:
    assert parsed("/help") == Command(name="help")


# --- policy -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["/policy", "/policy show", "/policy SHOW"])
def test_policy_show(text: str) -> None:
    assert parsed(text) == Command(name="policy", policy_action="show", tool=None)


@pytest.mark.parametrize("action", ["allow", "deny", "reset"])
def test_policy_tool_actions(action: str) -> None:
    assert parsed(f"/policy {action} bash") == Command(
        name="policy", policy_action=action, tool="bash"
    )


@pytest.mark.parametrize("action", ["allow", "deny", "reset"])
def test_policy_action_without_tool(action: str) -> None:
    with pytest.raises(CommandError, match=f"usage: /policy {action} <tool>"):
        parse_command(f"/policy {action}")


def test_policy_action_with_two_tools() -> None:
    with pytest.raises(CommandError, match="usage: /policy allow <tool>"):
        parse_command("/policy allow bash write")


def test_policy_show_with_argument() -> None:
    with pytest.raises(CommandError, match="usage: /policy show"):
        parse_command("/policy show bash")


def test_policy_unknown_action() -> None:
    with pytest.raises(CommandError, match=r"usage: /policy show\|grants\|allow"):
        parse_command("/policy frob x")


# --- namespaced form ----------------------------------------------------------------------


def test_clawgate_namespaced_approve() -> None:
    assert parsed("/clawgate approve abc always") == Command(
        name="approve", approval_id="abc", scope="always", grant=GrantTerms()
    )


@pytest.mark.parametrize("text", ["/clawgate", "/clawgate   ", "/CLAWGATE"])
def test_clawgate_alone_is_help(text: str) -> None:
    assert parsed(text) == Command(name="help")


def test_clawgate_with_slashed_command() -> None:
    assert parsed("/clawgate /pending") == Command(name="pending")


def test_clawgate_errors_propagate() -> None:
    with pytest.raises(CommandError, match="usage: /approve"):
        parse_command("/clawgate approve")


# --- spelling, whitespace, ordinary messages ----------------------------------------------


@pytest.mark.parametrize("text", ["/APPROVE abc", "/Approve abc", "/aPpRoVe abc"])
def test_command_word_case_insensitive(text: str) -> None:
    assert parsed(text) == Command(name="approve", approval_id="abc", scope="once")


def test_approval_id_case_preserved() -> None:
    assert parsed("/approve AbC").approval_id == "AbC"


@pytest.mark.parametrize("text", ["   /pending", "\n\t/pending  \n", "  /cancel"])
def test_leading_and_trailing_whitespace(text: str) -> None:
    assert parsed(text).name in ("pending", "cancel")


def test_extra_whitespace_between_words() -> None:
    assert parsed("/approve    abc    always") == Command(
        name="approve", approval_id="abc", scope="always", grant=GrantTerms()
    )
    assert parsed("/reject abc   too   risky").reason == "too   risky"


@pytest.mark.parametrize(
    "text",
    [
        "hello there",
        "please /approve abc",
        "",
        "   ",
        "/usr/bin/ls",
        "/tmp",
        "/",
        "/approvex abc",
        "/frob",
    ],
)
def test_ordinary_text_is_not_a_command(text: str) -> None:
    assert parse_command(text) is None


def test_namespaced_unknown_command_is_an_error_not_a_message() -> None:
    with pytest.raises(CommandError, match="unknown command 'frob'"):
        parse_command("/clawgate frob")


def test_nested_namespace_is_not_recursed_into() -> None:
    with pytest.raises(CommandError, match="unknown command 'clawgate'"):
        parse_command("/clawgate " * 2000)


def test_approve_scope_is_case_insensitive() -> None:
    assert parsed("/approve abc ALWAYS").scope == "always"


def test_approve_with_edit_keeps_the_arguments_as_typed() -> None:
    command = parsed('/approve abc EDIT {"command": "rm Build/TMP"}')
    assert command is not None and command.approval_id == "abc"
    assert command.edit == '{"command": "rm Build/TMP"}' and command.grant is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/mode", Command(name="mode")),
        ("/mode plan", Command(name="mode", choice="plan")),
        ("/clawgate mode edits", Command(name="mode", choice="edits")),
        ("/model", Command(name="model")),
        ("/model big", Command(name="model", choice="big")),
    ],
)
def test_mode_and_model(text: str, expected: Command) -> None:
    assert parsed(text) == expected


def test_mode_takes_one_name() -> None:
    with pytest.raises(CommandError, match=r"usage: /model \[name\]"):
        parse_command("/model big small")
