"""The policy page (admins): the effective policy of one scope, where each rule comes from, and
changes of its Redis layer, as `/policy show` and `/policy allow|deny|reset` do in a chat.

A scope is `global`, a conversation id or a prefix of one (runtime/policy/model.py). Only
admins who reach it (`PolicyService.reach`: the settings' admins reach every scope, a file
scope's admins theirs and narrower) see it; anyone else gets a 403. A change goes through
`PolicyService.change` whoever sends it: that validates the tool and scope, checks the reach
again and audits it (`policy_changed`, or `policy_refused` with why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiohttp import web
from redis.exceptions import RedisError

from adapters.policy_text import hook_target
from adapters.web.context import CONSOLE
from adapters.web.render import SESSION, message, render
from runtime.audit import AuditLog
from runtime.models import Actor
from runtime.policy.model import (
    GLOBAL,
    Override,
    PolicyDocument,
    check_scope,
    override_state,
    scope_label,
    scopes_of,
)
from runtime.policy.resolve import (
    EffectivePolicy,
    ToolState,
    ToolVerdict,
    describe_state,
    file_label,
)
from runtime.policy.service import PolicyChangeError, PolicyService, PolicyUsageError

ACTIONS = ("allow", "deny", "reset")
RECENT = 500  # audit entries read for the conversations seen lately (the scope picker)
MAX_FIELD = 200  # characters of a scope or tool name; ids are far shorter
# Which layer a tool's verdict came from, read from runtime/policy/resolve.py's labels.
REDIS, FILE, DEFAULTS = "Redis override", "policy file", "settings and defaults"


def add_routes(app: web.Application) -> None:
    app.router.add_get("/policy", policy_page, name="policy")
    app.router.add_post("/policy/change", change, name="policy_change")


@dataclass(frozen=True, slots=True)
class ToolRow:
    tool: str
    state: ToolState
    words: str  # the state for people: "always asks"
    why: str  # the verdict's source: which rule decided, and where it is
    layer: str  # REDIS, FILE or DEFAULTS


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    value: str
    source: str


@dataclass(frozen=True, slots=True)
class OverrideRow:
    scope: str  # its label
    here: bool  # at the chosen scope itself (else a wider one, which applies too)
    tool: str
    state: str
    by: str
    at: int
    reach: str  # its label: who may change or reset it (admins of this scope or wider)


def layer_of(verdict: ToolVerdict) -> str:
    """The layer a verdict's source names."""
    return {"override": REDIS, "policy_file": FILE}.get(verdict.layer, DEFAULTS)


def tool_rows(policy: EffectivePolicy) -> list[ToolRow]:
    return [
        ToolRow(tool, v.state, describe_state(v.state), v.source, layer_of(v))
        for tool, v in policy.tools.items()
    ]


def _people(people: Iterable[str]) -> str:
    return ", ".join(sorted(people)) or "nobody"


def _after(seconds: float | None) -> str:
    return "never" if seconds is None else f"after {seconds:g} s"


def _counts(needed: Mapping[str, int]) -> str:
    return ", ".join(f"{key}: {n}" for key, n in sorted(needed.items())) or "1 (one approver)"


def approval_rules(policy: EffectivePolicy) -> list[Rule]:
    """The approval, access and mode rules, each with where it came from (`sources`)."""
    src = policy.sources
    direct = "open" if policy.direct_messages else "closed"
    users = "everyone" if policy.users is None else _people(policy.users)
    escalation = _after(policy.escalate_after)
    if policy.escalate_after is not None:
        escalation += f" to {_people(policy.escalate_to)}"
    return [
        Rule("admins", _people(policy.admins), src["admins"]),
        Rule("approvers", _people(policy.approvers), src["approvers"]),
        Rule(
            "requester may approve",
            "yes" if policy.requester_may_approve else "no",
            src["requester_may_approve"],
        ),
        Rule("timeout", f"{policy.approval_timeout:g} s", src["timeout"]),
        Rule("approvers needed per tool", _counts(policy.quorum_tools), src["quorum_tools"]),
        Rule(
            "approvers needed per risk reason",
            _counts(policy.quorum_reasons),
            src["quorum_reasons"],
        ),
        Rule("requests also go to", ", ".join(policy.notify) or "nowhere else", src["notify"]),
        Rule("reminder", _after(policy.remind_after), src["remind_after"]),
        Rule("escalation", escalation, src["escalate_after"]),
        Rule(
            '"approve always" covers any arguments of',
            ", ".join(sorted(policy.generalize_arguments)) or "no tool",
            src["generalize_arguments"],
        ),
        Rule("who may use clawgate (admins always)", users, src["users"]),
        Rule("direct messages", direct, src["direct_messages"]),
        Rule("mode", policy.mode, src["mode"]),
        Rule("loosest mode allowed", policy.mode_max, src["mode_max"]),
        Rule("model", policy.model_name, src["model"]),
    ]


def risk_rules(policy: EffectivePolicy) -> list[Rule]:
    """The `[risk]` extensions of the built-in rules: lists add up from every scope, the
    other values come from the most specific scope that sets them."""
    risk, src = policy.risk, policy.sources
    added = "the policy file, every scope's added up"
    listed = [
        ("ask patterns", risk.ask_patterns),
        ("deny patterns", risk.deny_patterns),
        ("protected paths", risk.protected_paths),
    ]
    chosen = [
        ("safe programs", ", ".join(risk.safe_programs) or "built in only", "safe_programs"),
        ("safe tools", ", ".join(risk.safe_tools) or "none", "safe_tools"),
        (
            "an edit asks when it deletes",
            f"{risk.large_deletion_lines}+ lines",
            "large_deletion_lines",
        ),
    ]
    return [
        *(
            Rule(name, ", ".join(values) or "none", added if values else "default: none")
            for name, values in listed
        ),
        *(
            Rule(name, value, src.get(f"risk.{key}", "default: built in"))
            for name, value, key in chosen
        ),
        Rule(
            "locked paths (no call changes them)",
            ", ".join(risk.locked_paths) or "none",
            "the policy file, as it lies in the work directory" if risk.locked_paths else "-",
        ),
    ]


def override_rows(scope: str, overrides: Mapping[str, Mapping[str, Override]]) -> list[OverrideRow]:
    """The Redis layer that applies at `scope`: its own overrides and its wider scopes'."""
    return [
        OverrideRow(scope_label(at), at == scope, tool, o.state, o.by, o.at, scope_label(o.reach))
        for at in scopes_of(scope)
        for tool, o in sorted(overrides.get(at, {}).items())
    ]


def scope_choices(document: PolicyDocument, seen: Iterable[str], chosen: str) -> list[str]:
    """The scopes to pick from: global, the file's, the chosen one and its wider ones, and
    the conversations seen lately (invalid ones left out), global first, then by name."""
    found = {GLOBAL, *document.conversations, *scopes_of(chosen)}
    for scope in seen:
        try:
            found.add(check_scope(scope))
        except ValueError:
            continue
    return sorted(found, key=lambda s: (s != GLOBAL, s))


async def _seen(audit: AuditLog) -> list[str]:
    """Conversations (and scopes changed) in the newest audit entries."""
    seen = []
    for entry in await audit.newest(RECENT):
        if "conversation" in entry.fields:
            seen.append(entry.fields["conversation"])
        if entry.event == "policy_changed" and entry.fields.get("scope", "global") != "global":
            seen.append(entry.fields["scope"])
    return seen


def _reachable(policies: PolicyService, actor: Actor, scopes: list[str]) -> list[str]:
    return [scope for scope in scopes if policies.reach(actor, scope) is not None]


async def policy_page(request: web.Request) -> web.StreamResponse:
    console, actor = request.app[CONSOLE], request[SESSION].actor
    scope = request.query.get("scope")
    if scope is not None and scope.strip() == scope_label(GLOBAL):  # as the picker shows it
        scope = GLOBAL
    if scope is None:  # the widest scope they are an admin of, global for the settings' admins
        policies = console.runtime.policies
        picked = scope_choices(policies.document, await _seen(console.runtime.audit), GLOBAL)
        scope = next(iter(_reachable(policies, actor, picked)), GLOBAL)
    return await _show(request, scope.strip())


async def change(request: web.Request) -> web.StreamResponse:
    console, actor = request.app[CONSOLE], request[SESSION].actor
    form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
    scope, tool = form.get("scope", "").strip(), form.get("tool", "").strip()
    action = form.get("state", "")
    if len(scope) > MAX_FIELD or len(tool) > MAX_FIELD:
        text = f"Policy not changed: a scope or tool name is at most {MAX_FIELD} characters."
        return message(request, "Policy not changed", text, 400)
    if action not in ACTIONS:
        text = "Policy not changed: the change is one of allow, deny or reset."
        return message(request, "Policy not changed", text, 400)
    try:
        result = await console.runtime.policies.change(scope, tool, override_state(action), actor)
        status = 200
    except PolicyUsageError as exc:
        result, status = f"Policy not changed: {exc}.", 400
    except PolicyChangeError as exc:
        result, status = f"Policy not changed: {exc}.", 403
    except RedisError:
        text = "Cannot reach Redis, so the policy was neither read nor changed; try again."
        return message(request, "Policy not changed", text, 503)
    return await _show(request, scope, result, status)


async def _show(
    request: web.Request, scope: str, result: str | None = None, status: int = 200
) -> web.StreamResponse:
    """The policy page for `scope`, with the result of a change; or why it may not be seen."""
    console, actor = request.app[CONSOLE], request[SESSION].actor
    policies = console.runtime.policies
    if len(scope) > MAX_FIELD:
        return message(request, "Policy", f"A scope is at most {MAX_FIELD} characters.", 400)
    try:
        check_scope(scope)
    except ValueError as exc:
        return message(request, "Policy", result or f"Not shown: {exc}.", 400)
    if policies.reach(actor, scope) is None:
        text = f"Only admins of {scope_label(scope)} may see its policy; {actor.key} is not one."
        return message(request, "Not allowed", result or text, 403)
    effective = await policies.effective(scope)
    overrides = await policies.overrides(scope)
    scopes = scope_choices(policies.document, await _seen(console.runtime.audit), scope)
    return render(
        request,
        "policy.html",
        status=status,
        title="Policy",
        scope=scope,
        label=scope_label(scope),
        wider=[(s, scope_label(s)) for s in reversed(scopes_of(scope))],
        scopes=[(s, scope_label(s)) for s in _reachable(policies, actor, scopes)],
        tools=tool_rows(effective),
        offered=sorted(effective.offered),
        rules=approval_rules(effective),
        risk=risk_rules(effective),
        hooks=[(h, hook_target(h), file_label(h.scope)) for h in effective.hooks],
        overrides=override_rows(scope, overrides),
        actions=ACTIONS,
        result=result,
        failed=status != 200,
    )
