"""The live policy: the file's document (replaced on reload) under the admins' overrides,
which live in Redis so every process sees a change from its next model step on."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence

from redis.asyncio import Redis

from runtime.approval.risk import RiskConfig, RiskPolicy
from runtime.audit import AuditLog
from runtime.models import Actor
from runtime.policy.model import (
    Override,
    OverrideState,
    PolicyDocument,
    check_scope,
    scope_label,
)
from runtime.policy.resolve import Defaults, EffectivePolicy, Overrides, resolve
from runtime.store.keys import Keys

log = logging.getLogger(__name__)
SEPARATOR = "\x1f"


class PolicyChangeError(Exception):
    """A change that was refused or is malformed; the text says why, for the person asking."""


def document_hash(document: PolicyDocument) -> str:
    return hashlib.sha256(document.model_dump_json().encode()).hexdigest()[:12]


class PolicyService:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        defaults: Defaults,
        tools: Sequence[str],
        document: PolicyDocument | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """`tools` are every tool the process knows, in the order the model is shown them."""
        self.redis = redis
        self.key = keys.policy_overrides()
        self.defaults = defaults
        self.tools = tuple(tools)
        self.document = document or PolicyDocument()
        self.audit = audit
        self._risk: dict[str, RiskPolicy] = {}

    async def overrides(self) -> dict[str, dict[str, Override]]:
        found: dict[str, dict[str, Override]] = {}
        for field, value in (await self.redis.hgetall(self.key)).items():
            scope, _, tool = str(field).partition(SEPARATOR)
            try:
                found.setdefault(scope, {})[tool] = Override.model_validate_json(value)
            except ValueError:
                # Fail closed: an unreadable override counts as a deny of its tool.
                log.warning("unreadable policy override %r: treated as a deny", field)
                found.setdefault(scope, {})[tool] = Override(state="deny", by="?", at=0)
        return found

    def resolve(self, conversation_id: str, overrides: Overrides) -> EffectivePolicy:
        return resolve(self.document, overrides, conversation_id, self.defaults, self.tools)

    async def effective(self, conversation_id: str) -> EffectivePolicy:
        """The policy of one conversation right now (one Redis round trip)."""
        return self.resolve(conversation_id, await self.overrides())

    def risk_policy(self, config: RiskConfig) -> RiskPolicy:
        """The compiled risk rules for a merged `[risk]` (compiling patterns is not free)."""
        key = config.model_dump_json()
        policy = self._risk.get(key)
        if policy is None:
            policy = self._risk[key] = RiskPolicy(config)
        return policy

    async def replace(self, document: PolicyDocument, origin: str) -> None:
        """Swap in a newly loaded file; runs in flight keep the step they are in."""
        old, self.document = document_hash(self.document), document
        new = document_hash(document)
        if old != new and self.audit is not None:
            await self.audit.record("policy_reloaded", actor=origin, old=old, new=new)

    async def change(self, scope: str, tool: str, state: OverrideState | None, actor: Actor) -> str:
        """Set (`allow`/`deny`) or remove (None) the override of `tool` at `scope`, as `actor`;
        returns what changed, raises `PolicyChangeError` for what may not."""
        try:
            check_scope(scope)
        except ValueError as exc:
            raise PolicyChangeError(str(exc)) from None
        if tool not in self.tools:
            known = ", ".join(self.tools)
            raise PolicyChangeError(f"unknown tool {tool!r}; tools: {known}")
        overrides = await self.overrides()
        before = self.resolve(scope, overrides)
        where = scope_label(scope)
        if not before.approver_policy().is_admin(actor):
            if self.audit is not None:
                await self.audit.record(
                    "policy_refused", actor=actor.key, scope=where, tool=tool, why="not an admin"
                )
            raise PolicyChangeError(
                f"only admins may change the policy of {where}; {actor.key} is not one"
            )
        field = f"{scope}{SEPARATOR}{tool}"
        old = overrides.get(scope, {}).get(tool)
        scoped = overrides.setdefault(scope, {})
        if state is None:
            if old is None:
                return f"{tool} has no override in {where}; nothing to reset."
            del scoped[tool]
        else:
            scoped[tool] = Override(state=state, by=actor.key, at=int(time.time() * 1000))
        after = self.resolve(scope, overrides).verdict(tool)
        if state == "allow" and after.state in ("deny", "off"):
            raise PolicyChangeError(
                f"{tool} stays {_word(after.state)} in {where}: {after.source}; an allow cannot "
                "lift that, so nothing was changed"
            )
        if state is None:
            await self.redis.hdel(self.key, field)
        else:
            await self.redis.hset(self.key, field, scoped[tool].model_dump_json())
        if self.audit is not None:
            await self.audit.record(
                "policy_changed",
                actor=actor.key,
                scope=where,
                tool=tool,
                old=old.state if old else "none",
                new=state or "reset",
                effective=after.state,
            )
        was = before.verdict(tool)
        return (
            f"{tool} in {where}: now {_word(after.state)} ({after.source}); "
            f"was {_word(was.state)} ({was.source})."
        )


def _word(state: str) -> str:
    return {
        "allow": "allowed",
        "ask": "allowed, always asks",
        "deny": "denied",
        "off": "off (not offered)",
    }[state]


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
            "risk": policy.risk.model_dump(),
            "sources": policy.sources,
        },
        indent=2,
    )
