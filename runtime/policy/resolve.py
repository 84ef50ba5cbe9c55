"""The effective policy of one conversation: the file's scopes and the admins' overrides
layered over the settings' defaults, each value with where it came from.

Layers, least specific first: the defaults, then per matching scope (global, platform,
workspace, chat) the file's rules and above them the overrides stored for that scope.
- Whether a tool may run comes from the most specific layer that says so (an override names
  one tool; a file scope says it with `deny` or an `allow` list), but a deny in any layer
  wins over every allow: an admin's allow in one chat cannot lift a global deny.
- `ask`, `[risk]` patterns and protected paths, admins and approvers add up.
- `requester_may_approve`, the approval timeout and the other `[risk]` values: most specific.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, TypeVar

from runtime.mcp.config import is_mcp_name, names, server_wildcard, split_name
from runtime.models import Actor, PolicyDecision, PolicySource, PolicyVerdict
from runtime.policy.approvers import ApproverPolicy
from runtime.policy.listed_models import DEFAULT_MODEL, ListedModel
from runtime.policy.model import (
    EVERYONE,
    Choice,
    HookConfig,
    Override,
    PolicyDocument,
    ScopeRules,
    scope_label,
    scopes_of,
)
from runtime.policy.modes import DEFAULT_MAX, DEFAULT_MODE, MODES, Mode, capped
from runtime.risk.policy import RiskConfig

ToolState = Literal["allow", "ask", "deny", "off"]
_T = TypeVar("_T")
Overrides = Mapping[str, Mapping[str, Override]]  # scope -> tool -> override
Choices = Mapping[str, Choice]  # "mode" / "model" -> the conversation's choice


STATE_WORDS: dict[ToolState, str] = {
    "allow": "allowed",
    "ask": "always asks",
    "deny": "denied",
    "off": "off",
}


def describe_state(state: ToolState) -> str:
    return STATE_WORDS[state]


@dataclass(frozen=True, slots=True)
class Defaults:
    """What applies where neither the file nor an override says anything (the settings)."""

    enabled: tuple[str, ...]  # CLAWGATE_ENABLED_TOOLS: the tools this process has at all
    admins: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()
    approval_timeout: float = 3600.0
    admins_from: str = "CLAWGATE_ADMINS"  # where `admins` came from, for people
    locked_paths: tuple[str, ...] = ()  # the policy file, when in the work directory


@dataclass(frozen=True, slots=True)
class ToolVerdict:
    state: ToolState  # allow: runs (risk rules may ask); ask: always asks; deny/off: never
    source: str  # where the deciding value came from, for people

    @property
    def layer(self) -> PolicySource:
        """The layer `source` names: an admin's override (stored in Redis), the policy file,
        else the settings (CLAWGATE_ENABLED_TOOLS, what is off until someone allows it)."""
        if self.source.startswith(OVERRIDE_LABEL):
            return "override"
        return "policy_file" if FILE_LABEL in self.source else "settings"

    def decision(self, verdict: PolicyVerdict) -> PolicyDecision:
        """This verdict as the policy decision on a call (`rule`: the source, shortened)."""
        return PolicyDecision(verdict=verdict, source=self.layer, rule=self.source[:RULE_CHARS])


@dataclass(frozen=True, slots=True)
class ScopedHook:
    """An admin hook (runtime/hooks) and the scope of the file that configures it."""

    name: str
    scope: str
    config: HookConfig

    def checks(self, tool: str) -> bool:
        return self.config.tools is None or names(tool, self.config.tools)


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """Shared by every run with the same inputs (runtime.policy.service caches it): its
    tables are read-only."""

    conversation: str
    tools: Mapping[str, ToolVerdict]
    risk: RiskConfig
    admins: frozenset[str]
    approvers: frozenset[str]
    requester_may_approve: bool
    approval_timeout: float
    remind_after: float | None = None  # seconds: bring a pending request up again
    escalate_after: float | None = None  # seconds: then `escalate_to` may decide it too
    escalate_to: frozenset[str] = frozenset()
    # Where approval requests are posted too (conversation ids), from every scope.
    notify: tuple[str, ...] = ()
    # The N-person rule (tool or risk-reason regex -> approvers needed), from every scope.
    quorum_tools: Mapping[str, int] = field(default_factory=dict)
    quorum_reasons: Mapping[str, int] = field(default_factory=dict)
    users: frozenset[str] | None = None  # who may talk to the bot here; None: everyone
    # MCP tools (or `<server>.*`) whose "approve always" covers any arguments, from every scope.
    generalize_arguments: frozenset[str] = frozenset()
    direct_messages: bool = True
    hooks: tuple[ScopedHook, ...] = ()  # every scope's, least specific first
    mode: Mode = DEFAULT_MODE  # runtime/policy/modes.py: the conversation's, within mode_max
    mode_max: Mode = DEFAULT_MAX  # the loosest mode allowed here
    model: ListedModel | None = None  # the conversation's listed model; None: the process's
    sources: Mapping[str, str] = field(default_factory=dict)  # setting -> where it came from

    @property
    def model_name(self) -> str:
        return DEFAULT_MODEL if self.model is None else self.model.name

    @property
    def offered(self) -> frozenset[str]:
        """The tools the model is shown here."""
        return frozenset(t for t, v in self.tools.items() if v.state in ("allow", "ask"))

    def hooks_for(self, tool: str) -> tuple[ScopedHook, ...]:
        """The admin hooks that check a call of `tool` here."""
        return tuple(hook for hook in self.hooks if hook.checks(tool))

    def verdict(self, tool: str) -> ToolVerdict:
        return self.tools.get(tool, ToolVerdict("off", "not a tool of this process"))

    def quorum(self, tool: str, reasons: Iterable[str]) -> int:
        """How many distinct approvers a call of `tool` with these risk reasons needs."""
        needed = [self.quorum_tools.get(tool, 1)]
        if is_mcp_name(tool):
            needed.append(self.quorum_tools.get(server_wildcard(tool), 1))
        needed += [
            n
            for pattern, n in self.quorum_reasons.items()
            if any(re.search(pattern, reason) for reason in reasons)
        ]
        return max(needed)

    def generalizes(self, tool: str) -> bool:
        """Whether an "approve always" of this MCP tool covers any arguments (an admin said
        they are safe to generalize), not only the exact ones approved."""
        return names(tool, self.generalize_arguments)

    def access_refusal(self, actor: Actor, direct: bool) -> str | None:
        """Why `actor` may not talk to the bot here (None if they may); admins always may."""
        if self.approver_policy().is_admin(actor):
            return None
        if direct and not self.direct_messages:
            return "direct messages with clawgate are closed here"
        if self.users is not None and actor.key not in self.users:
            return f"{actor.key} is not among the people who may use clawgate here"
        return None

    def approver_policy(self) -> ApproverPolicy:
        return ApproverPolicy.of(
            admins=self.admins,
            approvers=self.approvers,
            requester_may_approve=self.requester_may_approve,
        )


# Why an MCP tool nobody enabled is off: not a decision an admin made, so a narrower admin
# may lift it (runtime.policy.service).
MCP_OFF = "MCP tools are off until the policy allows them (/policy allow <server>.<tool>)"


FILE_LABEL, OVERRIDE_LABEL = "policy file [", "override ["
RULE_CHARS = 120  # of a verdict's source, as a call's policy decision names it


def file_label(scope: str) -> str:
    return f"{FILE_LABEL}{scope_label(scope)}]"


def override_label(scope: str, override: Override) -> str:
    when = datetime.fromtimestamp(override.at / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{OVERRIDE_LABEL}{scope_label(scope)}] by {override.by}, {when}"


@dataclass(frozen=True, slots=True)
class _Layer:
    scope: str
    rules: ScopeRules | None
    overrides: Mapping[str, Override]


def resolve(
    document: PolicyDocument,
    overrides: Overrides,
    conversation_id: str,
    defaults: Defaults,
    tools: Sequence[str],
    choices: Choices | None = None,
) -> EffectivePolicy:
    """The policy for `conversation_id`; `tools` are every tool the process knows; `choices`:
    the conversation's `/mode` and `/model` (None: nobody chose)."""
    layers = [
        _Layer(scope, document.at(scope), overrides.get(scope, {}))
        for scope in scopes_of(conversation_id)
    ]
    sources: dict[str, str] = {}
    servers = {name: scope for name, (scope, _) in document.mcp_servers().items()}
    choices = choices or {}
    mode, mode_max = _mode(layers, choices.get("mode"), sources)
    return EffectivePolicy(
        conversation=conversation_id,
        tools={tool: _tool_verdict(tool, layers, defaults, servers) for tool in tools},
        risk=_risk(layers, sources, defaults.locked_paths),
        admins=_people(layers, "admins", defaults.admins, defaults.admins_from, sources),
        approvers=_people(layers, "approvers", defaults.approvers, "CLAWGATE_APPROVERS", sources),
        requester_may_approve=_most_specific(
            layers, "requester_may_approve", False, "default: no", sources
        ),
        approval_timeout=_most_specific(
            layers, "timeout", defaults.approval_timeout, "CLAWGATE_APPROVAL_TIMEOUT", sources
        ),
        remind_after=_most_specific(layers, "remind_after", None, "default: never", sources),
        escalate_after=_most_specific(layers, "escalate_after", None, "default: never", sources),
        escalate_to=_people(layers, "escalate_to", (), "", sources),
        notify=_notify(layers, conversation_id, sources),
        quorum_tools=_quorum(layers, "quorum_tools", sources),
        quorum_reasons=_quorum(layers, "quorum_reasons", sources),
        users=_users(_most_specific(layers, "users", None, "default: everyone", sources)),
        direct_messages=_most_specific(layers, "direct_messages", True, "default: open", sources),
        generalize_arguments=_generalized(layers, sources),
        hooks=tuple(
            ScopedHook(name, layer.scope, hook)
            for layer in layers
            if layer.rules
            for name, hook in layer.rules.hooks.items()
            if hook.enabled
        ),
        mode=mode,
        mode_max=mode_max,
        model=_model(document, choices.get("model"), sources),
        sources=sources,
    )


def chosen_label(choice: Choice) -> str:
    when = datetime.fromtimestamp(choice.at / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"set by {choice.by}, {when}"


def _mode(
    layers: Sequence[_Layer], chosen: Choice | None, sources: dict[str, str]
) -> tuple[Mode, Mode]:
    """The conversation's mode within the most specific `[modes] max`, and that max."""
    limit: Mode = DEFAULT_MAX
    default: Mode = DEFAULT_MODE
    sources["mode_max"] = f"default: {DEFAULT_MAX}"
    default_from = f"default: {DEFAULT_MODE}"
    for layer in reversed(layers):
        if layer.rules and layer.rules.modes.max:
            limit, sources["mode_max"] = layer.rules.modes.max, file_label(layer.scope)
            break
    for layer in reversed(layers):
        if layer.rules and layer.rules.modes.default:
            default, default_from = layer.rules.modes.default, file_label(layer.scope)
            break
    if chosen is None:
        wanted, sources["mode"] = default, default_from
    elif chosen.value in MODES:
        wanted, sources["mode"] = chosen.value, chosen_label(chosen)
    else:  # fail closed: a choice nobody can read runs nothing
        wanted, sources["mode"] = "plan", f"unreadable choice {chosen.value[:20]!r}: plan"
    mode = capped(wanted, limit)
    if mode != wanted:
        sources["mode"] += f"; {wanted} is above the limit here, {limit} ({sources['mode_max']})"
    return mode, limit


def _model(
    document: PolicyDocument, chosen: Choice | None, sources: dict[str, str]
) -> ListedModel | None:
    listed = None if chosen is None else document.listed_model(chosen.value)
    if chosen is None or chosen.value == DEFAULT_MODEL:
        sources["model"] = "default: CLAWGATE_MODEL"
    elif listed is None:
        sources["model"] = f"{chosen.value} is no longer listed in the policy file: the default"
    else:
        sources["model"] = chosen_label(chosen)
    return listed


def _override(layer: _Layer, tool: str) -> Override | None:
    """The layer's override of `tool`: its own, else (an MCP tool) its server's `<server>.*`."""
    found = layer.overrides.get(tool)
    if found is None and is_mcp_name(tool):
        found = layer.overrides.get(server_wildcard(tool))
    return found


def _mcp_out_of_scope(
    tool: str, layers: Sequence[_Layer], servers: Mapping[str, str]
) -> ToolVerdict | None:
    """An MCP tool exists only where its server is configured (that scope and narrower)."""
    scope = servers.get(split_name(tool)[0])
    if scope is None:
        return ToolVerdict("off", "its MCP server is not configured")
    if scope not in {layer.scope for layer in layers}:
        return ToolVerdict("off", f"its MCP server serves {scope_label(scope)} only")
    return None


def _denied(tool: str, layers: Sequence[_Layer]) -> ToolVerdict | None:
    denials = []
    for layer in layers:
        if layer.rules and names(tool, layer.rules.tools.deny):
            denials.append(file_label(layer.scope))
        override = _override(layer, tool)
        if override is not None and override.state == "deny":
            denials.append(override_label(layer.scope, override))
    if denials:
        return ToolVerdict("deny", denials[-1])  # the most specific, for the explanation
    return None


def _tool_verdict(
    tool: str, layers: Sequence[_Layer], defaults: Defaults, servers: Mapping[str, str]
) -> ToolVerdict:
    """`servers`: each MCP server's name -> the scope it serves."""
    mcp = is_mcp_name(tool)
    if mcp:
        off = _mcp_out_of_scope(tool, layers, servers)
        if off is not None:
            return off
    elif tool not in defaults.enabled:
        return ToolVerdict("off", "not in CLAWGATE_ENABLED_TOOLS")
    denied = _denied(tool, layers)
    if denied is not None:
        return denied
    allowed_by = None if mcp else "default: CLAWGATE_ENABLED_TOOLS"
    for layer in reversed(layers):
        override = _override(layer, tool)
        if override is not None:  # an allow (a deny was handled above)
            allowed_by = override_label(layer.scope, override)
            break
        allow = layer.rules.tools.allow if layer.rules else None
        if allow is not None:
            if not names(tool, allow):
                return ToolVerdict("deny", f"not in the allow list of {file_label(layer.scope)}")
            allowed_by = file_label(layer.scope)
            break
    if allowed_by is None:
        return ToolVerdict("off", MCP_OFF)
    for layer in reversed(layers):
        if layer.rules and names(tool, layer.rules.tools.ask):
            return ToolVerdict("ask", f"always asks: {file_label(layer.scope)}")
    return ToolVerdict("allow", allowed_by)


def _people(
    layers: Sequence[_Layer],
    name: Literal["admins", "approvers", "escalate_to"],
    default: Iterable[str],
    setting: str,
    sources: dict[str, str],
) -> frozenset[str]:
    found = set(default)
    where = [setting] if found else []
    for layer in layers:
        people = getattr(layer.rules.approvals, name) if layer.rules else []
        if people:
            found.update(people)
            where.append(file_label(layer.scope))
    sources[name] = " + ".join(where) or "default: nobody"
    return frozenset(found)


def _most_specific(
    layers: Sequence[_Layer],
    name: Literal[
        "requester_may_approve",
        "timeout",
        "remind_after",
        "escalate_after",
        "users",
        "direct_messages",
    ],
    default: _T,
    default_source: str,
    sources: dict[str, str],
) -> _T:
    section = "access" if name in ("users", "direct_messages") else "approvals"
    for layer in reversed(layers):
        value = getattr(getattr(layer.rules, section), name) if layer.rules else None
        if value is not None:
            sources[name] = file_label(layer.scope)
            return value  # type: ignore[no-any-return]
    sources[name] = default_source
    return default


def _notify(
    layers: Sequence[_Layer], conversation_id: str, sources: dict[str, str]
) -> tuple[str, ...]:
    found = [c for layer in layers if layer.rules for c in layer.rules.approvals.notify]
    where = [
        file_label(layer.scope) for layer in layers if layer.rules and layer.rules.approvals.notify
    ]
    sources["notify"] = " + ".join(where) or "default: the thread only"
    return tuple(dict.fromkeys(c for c in found if c != conversation_id))


def _quorum(
    layers: Sequence[_Layer],
    name: Literal["quorum_tools", "quorum_reasons"],
    sources: dict[str, str],
) -> dict[str, int]:
    """Every scope's entries; the highest N of each key."""
    found: dict[str, int] = {}
    where = []
    for layer in layers:
        entries: dict[str, int] = getattr(layer.rules.approvals, name) if layer.rules else {}
        for key, n in entries.items():
            found[key] = max(n, found.get(key, 1))
        if entries:
            where.append(file_label(layer.scope))
    sources[name] = " + ".join(where) or "default: none"
    return found


def _generalized(layers: Sequence[_Layer], sources: dict[str, str]) -> frozenset[str]:
    found = [
        (layer.scope, tool)
        for layer in layers
        if layer.rules
        for tool in layer.rules.tools.generalize_arguments
    ]
    where = dict.fromkeys(file_label(scope) for scope, _ in found)
    sources["generalize_arguments"] = " + ".join(where) or "default: exact arguments only"
    return frozenset(tool for _, tool in found)


def _users(people: list[str] | None) -> frozenset[str] | None:
    return None if people is None or EVERYONE in people else frozenset(people)


def _risk(layers: Sequence[_Layer], sources: dict[str, str], locked: Sequence[str]) -> RiskConfig:
    merged = RiskConfig(locked_paths=list(locked)).model_dump()
    for name in ("ask_patterns", "deny_patterns", "protected_paths"):
        values: list[str] = []
        for layer in layers:
            if layer.rules:
                values += [v for v in getattr(layer.rules.risk, name) if v not in values]
        merged[name] = values
    for name in ("safe_programs", "safe_tools", "large_deletion_lines"):
        for layer in reversed(layers):
            value = getattr(layer.rules.risk, name) if layer.rules else None
            if value is not None:
                merged[name] = value
                sources[f"risk.{name}"] = file_label(layer.scope)
                break
    return RiskConfig.model_validate(merged)
