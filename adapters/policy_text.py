"""The effective policy as text, for `/policy show` in chat and `clawgate policy show`
(and as JSON for its `--json`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from runtime.approval.grants import EVERYWHERE, Grant
from runtime.policy.choices import fenced
from runtime.policy.model import scope_label, scopes_of
from runtime.policy.modes import MODE_WORDS
from runtime.policy.resolve import EffectivePolicy, ScopedHook, describe_state, file_label
from runtime.redact import redact_text, shown_url


def render_policy(policy: EffectivePolicy, block: bool = False) -> str:
    """`block`: the tools' columns in a code block (Slack's font is proportional)."""
    scopes = ", ".join(scope_label(s) for s in reversed(scopes_of(policy.conversation)))
    offered = ", ".join(t for t in policy.tools if t in policy.offered) or "none"
    if policy.mode == "plan":
        offered += "; in plan mode only those without side effects"
    width = max((len(t) for t in policy.tools), default=4)
    lines = [
        f"Policy for {scope_label(policy.conversation)} (scopes, most specific first: {scopes})",
        f"Tools (the model is offered: {offered}):",
        *fenced(
            [
                f"  {tool.ljust(width)}  {describe_state(v.state).ljust(11)}  {v.source}"
                for tool, v in policy.tools.items()
            ],
            block,
        ),
        "Approvals:",
        f"  admins: {_people(policy.admins, policy.sources['admins'])}",
        f"  approvers: {_people(policy.approvers, policy.sources['approvers'])}",
        f"  requester may approve: {'yes' if policy.requester_may_approve else 'no'}"
        f" ({policy.sources['requester_may_approve']})",
        f"  timeout: {policy.approval_timeout:g} s ({policy.sources['timeout']})",
        f"  approvers needed: {_quorum(policy)}",
        f"  requests also go to: {', '.join(policy.notify) or 'nowhere else'}"
        f" ({policy.sources['notify']})",
        f"  reminder: {_after(policy.remind_after)} ({policy.sources['remind_after']});"
        f" escalation: {_after(policy.escalate_after)}"
        f" to {_people(policy.escalate_to, policy.sources['escalate_to'])}",
        "Access:",
        "  who may use clawgate: "
        + (
            _people(policy.users, policy.sources["users"])
            if policy.users is not None
            else "everyone"
        )
        + ("" if policy.users is not None else f" ({policy.sources['users']})")
        + "; admins always",
        f"  direct messages: {'open' if policy.direct_messages else 'closed'}"
        f" ({policy.sources['direct_messages']})",
        "Mode and model (/mode, /model):",
        f"  {mode_line(policy)}",
        f"  loosest mode allowed: {policy.mode_max} ({policy.sources['mode_max']})",
        f"  model: {policy.model_name} ({policy.sources['model']})",
    ]
    risk = policy.risk
    extra = [
        (name, value)
        for name, value in (
            ("ask patterns", risk.ask_patterns),
            ("deny patterns", risk.deny_patterns),
            ("protected paths", risk.protected_paths),
            ("safe programs", risk.safe_programs),
        )
        if value
    ]
    lines.append("Risk rules: built in" + ("; plus:" if extra else ""))
    lines += [f"  {name}: {', '.join(value)}" for name, value in extra]
    lines.append(
        f"  safe tools: {', '.join(risk.safe_tools) or 'none'}; an edit deleting "
        f"{risk.large_deletion_lines}+ lines asks"
    )
    lines.append(
        "Hooks (the strictest answer wins; a failure asks):" if policy.hooks else "Hooks: none"
    )
    lines += [f"  {_hook(hook)}" for hook in policy.hooks]
    return "\n".join(lines)


def _hook(hook: ScopedHook) -> str:
    config = hook.config
    tools = ", ".join(config.tools) if config.tools is not None else "every tool"
    cache = f", answers kept {config.cache_seconds:g} s" if config.cache_seconds else ""
    return (
        f"{hook.name}: {hook_target(hook)}; checks {tools}; timeout {config.timeout:g} s{cache} "
        f"({file_label(hook.scope)})"
    )


def hook_target(hook: ScopedHook) -> str:
    """What the hook runs, secrets masked (a token in an argument or a URL)."""
    config = hook.config
    if config.url is not None:
        return f"POST {shown_url(config.url)}"
    return "command " + redact_text(" ".join(config.command or ()))


def mode_line(policy: EffectivePolicy) -> str:
    """The conversation's mode, for `/policy show` and `/pending`."""
    return f"mode: {policy.mode} ({policy.sources['mode']}): {MODE_WORDS[policy.mode]}"


def _after(seconds: float | None) -> str:
    return "never" if seconds is None else f"after {seconds:g} s"


def _quorum(policy: EffectivePolicy) -> str:
    rules = [f"{tool} {n}" for tool, n in sorted(policy.quorum_tools.items())]
    rules += [f"reasons matching {p!r} {n}" for p, n in sorted(policy.quorum_reasons.items())]
    if not rules:
        return "1 (default: one approver)"
    sources = " + ".join(
        dict.fromkeys(policy.sources[k] for k in ("quorum_tools", "quorum_reasons"))
    )
    return f"1, except: {', '.join(rules)} ({sources})"


def _users(policy: EffectivePolicy) -> str:
    source = policy.sources["users"]
    return f"everyone ({source})" if policy.users is None else _people(policy.users, source)


def _people(people: frozenset[str], source: str) -> str:
    return f"{', '.join(sorted(people))} ({source})" if people else "nobody"


def as_json(policy: EffectivePolicy) -> str:
    """The effective policy for `--json`."""
    return json.dumps(
        {
            "conversation": policy.conversation or "global",
            "tools": {t: {"state": v.state, "source": v.source} for t, v in policy.tools.items()},
            "offered": sorted(policy.offered),
            "admins": sorted(policy.admins),
            "approvers": sorted(policy.approvers),
            "requester_may_approve": policy.requester_may_approve,
            "approval_timeout": policy.approval_timeout,
            "notify": list(policy.notify),
            "remind_after": policy.remind_after,
            "escalate_after": policy.escalate_after,
            "escalate_to": sorted(policy.escalate_to),
            "quorum_tools": policy.quorum_tools,
            "quorum_reasons": policy.quorum_reasons,
            "users": None if policy.users is None else sorted(policy.users),
            "direct_messages": policy.direct_messages,
            "risk": policy.risk.model_dump(),
            "hooks": [
                {
                    "name": hook.name,
                    "scope": scope_label(hook.scope),
                    "runs": hook_target(hook),
                    "tools": hook.config.tools,
                    "timeout": hook.config.timeout,
                    "cache_seconds": hook.config.cache_seconds,
                }
                for hook in policy.hooks
            ],
            "mode": policy.mode,
            "mode_max": policy.mode_max,
            "model": policy.model_name,
            "sources": policy.sources,
        },
        indent=2,
    )


def render_grant(grant: Grant) -> str:
    """One line of `/policy grants` and `clawgate policy grants`."""
    if grant.scope == EVERYWHERE:
        where = "everywhere"
    elif grant.scope.startswith("thread:"):
        where = "thread " + grant.scope.removeprefix("thread:")
    else:
        where = grant.scope
    when = _utc(grant.at) if grant.at else "before grants were recorded"
    until = f"until {_utc(grant.expires_at)}" if grant.expires_at else "until revoked"
    by = grant.by or "?"
    return f"{grant.id}  `{grant.shown}`  {where}  by {by}, {when}, {until}"


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
