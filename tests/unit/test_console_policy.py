"""What the console's policy page shows of an effective policy (adapters/web/pages/policy.py):
each tool's state, why and from which layer; the approval rules with their sources; the
overrides that apply at a scope; the scopes to pick from."""

from __future__ import annotations

from adapters.web.pages.policy import (
    DEFAULTS,
    FILE,
    REDIS,
    approval_rules,
    override_rows,
    risk_rules,
    scope_choices,
    tool_rows,
)
from runtime.policy.model import GLOBAL, Override, PolicyDocument
from runtime.policy.resolve import Defaults, EffectivePolicy, resolve

CHAT = "slack:T1:C1"
TOOLS = ("read", "bash", "write", "edit", "fetch")
DOCUMENT = PolicyDocument.model_validate(
    {
        "tools": {"ask": ["write"]},
        "approvals": {"admins": ["slack:UA"], "timeout": 600},
        "modes": {"max": "ask"},
        "risk": {"ask_patterns": ["curl"], "large_deletion_lines": 50},
        "conversations": {
            "slack:T1": {
                "tools": {"deny": ["bash"]},
                "risk": {"ask_patterns": ["wget"], "safe_tools": ["read", "edit"]},
                "approvals": {"approvers": ["slack:UB"], "quorum_tools": {"edit": 2}},
            }
        },
    }
)
OVERRIDES = {
    GLOBAL: {"edit": Override(state="allow", by="slack:UA", at=1_700_000_000_000)},
    CHAT: {"read": Override(state="deny", by="slack:UA", at=1_700_000_000_000, reach=GLOBAL)},
}


def _policy() -> EffectivePolicy:
    defaults = Defaults(enabled=TOOLS[:-1], admins=frozenset({"slack:UOPS"}))
    return resolve(DOCUMENT, OVERRIDES, CHAT, defaults, TOOLS)


def test_each_tool_shows_its_state_why_and_the_layer_that_decided() -> None:
    rows = {row.tool: row for row in tool_rows(_policy())}
    assert (rows["read"].state, rows["read"].layer) == ("deny", REDIS)
    assert f"override [{CHAT}] by slack:UA" in rows["read"].why
    assert (rows["bash"].state, rows["bash"].layer) == ("deny", FILE)
    assert rows["bash"].why == "policy file [slack:T1]"
    assert (rows["write"].state, rows["write"].words) == ("ask", "always asks")
    assert rows["write"].layer == FILE
    assert (rows["edit"].state, rows["edit"].layer) == ("allow", REDIS)  # the global override
    assert (rows["fetch"].state, rows["fetch"].layer) == ("off", DEFAULTS)
    assert rows["fetch"].why == "not in CLAWGATE_ENABLED_TOOLS"


def test_the_approval_rules_say_where_each_comes_from() -> None:
    rules = {rule.name: (rule.value, rule.source) for rule in approval_rules(_policy())}
    assert rules["admins"] == (
        "slack:UA, slack:UOPS",
        "CLAWGATE_ADMINS + policy file [global]",
    )
    assert rules["approvers"] == ("slack:UB", "policy file [slack:T1]")
    assert rules["timeout"] == ("600 s", "policy file [global]")
    assert rules["approvers needed per tool"] == ("edit: 2", "policy file [slack:T1]")
    assert rules["requester may approve"] == ("no", "default: no")
    assert rules["loosest mode allowed"] == ("ask", "policy file [global]")
    assert rules["mode"][0] == "ask"  # the default, auto, capped by the limit


def test_the_risk_rules_say_what_adds_up_and_where_the_others_come_from() -> None:
    rules = {rule.name: (rule.value, rule.source) for rule in risk_rules(_policy())}
    assert rules["ask patterns"] == ("curl, wget", "the policy file, every scope's added up")
    assert rules["deny patterns"] == ("none", "default: none")
    assert rules["safe tools"] == ("read, edit", "policy file [slack:T1]")
    assert rules["an edit asks when it deletes"] == ("50+ lines", "policy file [global]")
    assert rules["safe programs"] == ("built in only", "default: built in")


def test_the_overrides_shown_are_those_that_apply_at_the_scope() -> None:
    rows = override_rows(CHAT, OVERRIDES)
    assert [(r.scope, r.tool, r.state, r.here) for r in rows] == [
        ("global", "edit", "allow", False),
        (CHAT, "read", "deny", True),
    ]
    assert [r.scope for r in override_rows("slack:T1", OVERRIDES)] == ["global"]


def test_the_scopes_to_pick_are_global_the_files_the_wider_ones_and_those_seen() -> None:
    seen = ["slack:T1:C2", "not a scope!", "slack:T1:C2", ""]
    assert scope_choices(DOCUMENT, seen, "feishu:tenant:chat") == [
        GLOBAL,
        "feishu",
        "feishu:tenant",
        "feishu:tenant:chat",
        "slack:T1",
        "slack:T1:C2",
    ]
