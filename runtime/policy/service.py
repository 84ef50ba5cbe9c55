"""The live policy: the file's document (replaced on reload) under the admins' overrides,
which live in Redis so every process sees a change from its next model step on."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from redis.asyncio import Redis

from runtime.audit import AuditLog
from runtime.mcp.config import WILDCARD, is_mcp_name, split_name
from runtime.models import Actor, ConversationRef
from runtime.policy.approvers import OPERATOR_PLATFORM
from runtime.policy.model import (
    GLOBAL,
    Choice,
    Override,
    OverrideState,
    PolicyDocument,
    check_scope,
    scope_label,
    scopes_of,
)
from runtime.policy.resolve import (
    MCP_OFF,
    Defaults,
    EffectivePolicy,
    Overrides,
    describe_state,
    resolve,
)
from runtime.risk.policy import RiskConfig, RiskPolicy
from runtime.store.keys import Keys
from runtime.tools.base import ToolContext

log = logging.getLogger(__name__)
SEPARATOR = "\x1f"
RISK_CACHE = 64  # compiled `[risk]` variants kept (one per distinct merged table)
POLICY_CACHE = 1024  # resolved policies kept (one per distinct set of inputs)


class PolicyChangeError(Exception):
    """A change that was refused; the text says why, for the person asking."""


class PolicyUsageError(PolicyChangeError):
    """A change that names no known tool or no valid scope."""


class ToolCatalog(Protocol):
    """Tools that come and go while the process runs (the MCP servers' tools)."""

    def names(self) -> Sequence[str]:
        """The tools known right now."""

    async def settled(self) -> None:
        """Return once every source has given its first answer (bounded in time), so that
        a first run does not miss tools that are still being listed."""


def document_hash(document: PolicyDocument) -> str:
    return hashlib.sha256(document.model_dump_json().encode()).hexdigest()[:12]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


# What a conversation's overrides and choices were read as: the raw replies, hashable, so
# that the same replies resolve to the same (cached) policy.
StoredOverrides = tuple[tuple[tuple[str, str], str | bytes], ...]  # (scope, tool), JSON
StoredChoices = tuple[tuple[str | bytes, str | bytes], ...]  # name, JSON; sorted by name


def _stored_overrides(
    fields: Sequence[tuple[str, str]], values: Sequence[str | bytes | None]
) -> StoredOverrides:
    return tuple((f, v) for f, v in zip(fields, values, strict=True) if v is not None)


def _overrides_of(stored: StoredOverrides) -> dict[str, dict[str, Override]]:
    found: dict[str, dict[str, Override]] = {}
    for (scope, tool), value in stored:
        try:
            override = Override.model_validate_json(value)
        except ValueError:
            # Fail closed: an unreadable override counts as a deny of its tool.
            log.warning("unreadable policy override for %s at %r: a deny", tool, scope)
            override = Override(state="deny", by="?", at=0)
        found.setdefault(scope, {})[tool] = override
    return found


def _wider(scope: str, than: str) -> bool:
    return len(scopes_of(scope)) < len(scopes_of(than))


class PolicyRead:
    """What one conversation's policy is made of, read in one round trip: `queue` puts the
    two reads on a pipeline, `take` is handed their replies (a `runtime.store.runs.Reads`)."""

    def __init__(
        self, service: PolicyService, conversation_id: str, fields: list[tuple[str, str]]
    ) -> None:
        self.service = service
        self.conversation_id = conversation_id
        self.fields = fields
        self.overrides: StoredOverrides = ()
        self.choices: StoredChoices = ()
        self.at = 0.0  # time.monotonic() when the replies came

    def queue(self, pipe: Any) -> None:
        pipe.hmget(self.service.key, [f"{s}{SEPARATOR}{t}" for s, t in self.fields])
        pipe.hgetall(self.service.keys.choices(self.conversation_id))

    def take(self, replies: Sequence[Any]) -> None:
        values, stored = replies
        self.at = time.monotonic()
        self.overrides = _stored_overrides(self.fields, values)
        self.choices = tuple(sorted(stored.items()))

    def policy(self, also_enabled: tuple[str, ...] = ()) -> EffectivePolicy:
        return self.service._resolved(
            self.conversation_id, self.overrides, self.choices, also_enabled
        )


def _choices_of(stored: StoredChoices) -> dict[str, Choice]:
    found = {}
    for name, value in stored:
        try:
            found[_text(name)] = Choice.model_validate_json(value)
        except ValueError:  # fail closed: the mode resolves to plan, the model to default
            found[_text(name)] = Choice(value="?", by="?", at=0)
    return found


class PolicyService:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        defaults: Defaults,
        tools: Sequence[str],
        document: PolicyDocument | None = None,
        audit: AuditLog | None = None,
        catalog: ToolCatalog | None = None,
    ) -> None:
        """`tools` are the built-in tools the process knows, in the order the model is shown
        them; `catalog` adds the MCP servers' tools, which change while it runs."""
        self.redis = redis
        self.keys = keys
        self.key = keys.policy_overrides()
        self.defaults = defaults
        self.builtin = tuple(tools)
        self.catalog = catalog
        self.document = document or PolicyDocument()
        self.audit = audit
        self._risk: dict[str, RiskPolicy] = {}
        # Resolved policies by their inputs, for `_resolved`: shared, so never mutated.
        self._policies: dict[tuple[Any, ...], EffectivePolicy] = {}
        self._policies_for: PolicyDocument | None = None  # the document they were resolved on
        # Told of each new policy file (the MCP servers follow it).
        self.watchers: list[Callable[[PolicyDocument], None]] = []

    @property
    def tools(self) -> tuple[str, ...]:
        """Every tool the process knows right now."""
        if self.catalog is None:
            return self.builtin
        return tuple(dict.fromkeys([*self.builtin, *self.catalog.names()]))

    def _override_names(self) -> list[str]:
        """What an override may name: a tool, or every tool of an MCP server (`github.*`)."""
        servers = [f"{name}.{WILDCARD}" for name in self.document.mcp_servers()]
        return [*self.tools, *servers]

    def _nameable(self, tool: str) -> bool:
        """A tool an override may name: a known one, or one of a configured MCP server (it may
        be down, or list the tool later)."""
        if tool in self.tools:
            return True
        server, name = split_name(tool)
        return is_mcp_name(tool) and bool(name) and server in self.document.mcp_servers()

    async def overrides(
        self, conversation_id: str, also: Sequence[str] = ()
    ) -> dict[str, dict[str, Override]]:
        """The overrides that can apply to one conversation (each scope of it x each tool):
        one round trip however many conversations have overrides."""
        fields = self._override_fields(conversation_id, also)
        values = await self.redis.hmget(self.key, [f"{s}{SEPARATOR}{t}" for s, t in fields])
        return _overrides_of(_stored_overrides(fields, values))

    def _override_fields(self, conversation_id: str, also: Sequence[str]) -> list[tuple[str, str]]:
        named = dict.fromkeys([*self._override_names(), *also])
        return [(s, t) for s in scopes_of(conversation_id) for t in named]

    async def read(self, conversation_id: str) -> PolicyRead:
        """The reads of one conversation's policy (its overrides, its `/mode` and `/model`),
        to queue on a pipeline: of their own (`effective`) or riding another trip (a run's
        start: runtime/store/runs.py)."""
        if self.catalog is not None:
            await self.catalog.settled()
        return PolicyRead(self, conversation_id, self._override_fields(conversation_id, ()))

    async def admit(self, actor: Actor, conversation: ConversationRef) -> str | None:
        """Why `actor` may not talk to the bot in `conversation`, or None if they may (the
        file's `[access]`: no Redis round trip). A refusal is audited."""
        policy = self._resolved(conversation.id, (), (), ())
        refusal = policy.access_refusal(actor, conversation.direct)
        if refusal is not None and self.audit is not None:
            await self.audit.record(
                "access_refused", actor.key, conversation=conversation.id, why=refusal
            )
        return refusal

    def resolve(
        self, conversation_id: str, overrides: Overrides, also: Sequence[str] = ()
    ) -> EffectivePolicy:
        """`also`: names to judge besides the known tools (an MCP tool not listed right now,
        or `<server>.*`, which an override may name)."""
        tools = (*self.tools, *(name for name in also if name not in self.tools))
        return resolve(self.document, overrides, conversation_id, self.defaults, tools)

    async def for_context(
        self, ctx: ToolContext, also_enabled: tuple[str, ...] = ()
    ) -> EffectivePolicy:
        """The policy of the conversation a run (its tool context) belongs to."""
        conversation = ctx.conversation.id if ctx.conversation else ""
        return await self.effective(conversation, also_enabled)

    async def effective(
        self, conversation_id: str, also_enabled: tuple[str, ...] = ()
    ) -> EffectivePolicy:
        """The policy of one conversation right now, with its mode and model (one Redis round
        trip). `also_enabled`:
        tools to judge as if CLAWGATE_ENABLED_TOOLS held them (an explorer's `read`)."""
        read = await self.read(conversation_id)
        pipe = self.redis.pipeline(transaction=False)
        read.queue(pipe)
        read.take(await pipe.execute())
        return read.policy(also_enabled)

    def _resolved(
        self,
        conversation_id: str,
        overrides: StoredOverrides,
        choices: StoredChoices,
        also_enabled: tuple[str, ...],
    ) -> EffectivePolicy:
        """The policy resolved from these replies, resolved again only when one of its inputs
        changed: the replies, the document (`replace` swaps it), the defaults, the tools (the
        MCP catalog's change)."""
        tools = self.tools
        key = (conversation_id, overrides, choices, also_enabled, self.defaults, tools)
        if self._policies_for is not self.document or len(self._policies) >= POLICY_CACHE:
            self._policies.clear()
            self._policies_for = self.document
        policy = self._policies.get(key)
        if policy is None:
            defaults = self.defaults
            if also_enabled:
                enabled = (*defaults.enabled, *also_enabled)
                defaults = dataclasses.replace(defaults, enabled=enabled)
            policy = self._policies[key] = resolve(
                self.document,
                _overrides_of(overrides),
                conversation_id,
                defaults,
                tools,
                _choices_of(choices),
            )
        return policy

    def risk_policy(self, config: RiskConfig) -> RiskPolicy:
        """The compiled risk rules for a merged `[risk]` (compiling patterns is not free)."""
        key = config.model_dump_json()
        policy = self._risk.get(key)
        if policy is None:
            if len(self._risk) >= RISK_CACHE:
                self._risk.clear()
            policy = self._risk[key] = RiskPolicy(config)
        return policy

    async def replace(self, document: PolicyDocument, origin: str) -> bool:
        """Swap in a newly loaded file (True if it differs); runs in flight keep the step
        they are in."""
        old, self.document = document_hash(self.document), document
        new = document_hash(document)
        if old == new:
            return False
        for watcher in self.watchers:
            watcher(document)
        if self.audit is not None:
            await self.audit.record("policy_reloaded", actor=origin, old=old, new=new)
        return True

    def reach(self, actor: Actor, scope: str) -> str | None:
        """The widest scope of `scope` (or above it) that `actor` is an admin of; None if
        they are no admin here. The operator CLI and the settings' admins reach everywhere."""
        if actor.platform == OPERATOR_PLATFORM or actor.key in self.defaults.admins:
            return GLOBAL
        for candidate in scopes_of(scope):
            rules = self.document.at(candidate)
            if rules is not None and actor.key in rules.approvals.admins:
                return candidate
        return None

    async def change(self, scope: str, tool: str, state: OverrideState | None, actor: Actor) -> str:
        """Set (`allow`/`deny`) or remove (None) the override of `tool` at `scope`, as `actor`;
        returns what changed. Raises `PolicyUsageError` for an unknown tool or scope and
        `PolicyChangeError` for a change that is not allowed; both are audited."""
        new = state or "reset"
        problem = None
        try:
            check_scope(scope)
        except ValueError as exc:
            problem = str(exc)
        if problem is None and not self._nameable(tool):
            problem = f"unknown tool {tool!r}; tools: {', '.join(self.tools)}"
        if problem is not None:
            await self._audit("policy_refused", actor, scope, tool, new, None, why=problem)
            raise PolicyUsageError(problem)
        overrides = await self.overrides(scope, (tool,))
        old = overrides.get(scope, {}).get(tool)
        try:
            reach, message = self._check(scope, tool, state, actor, overrides, old)
        except PolicyChangeError as exc:
            await self._audit("policy_refused", actor, scope, tool, new, old, why=str(exc))
            raise
        if message is not None:
            return message
        field = f"{scope}{SEPARATOR}{tool}"
        before = self.resolve(scope, overrides, (tool,)).verdict(tool)
        scoped = overrides.setdefault(scope, {})
        if state is None:
            scoped.pop(tool, None)
            await self.redis.hdel(self.key, field)
        else:
            if old is not None and _wider(old.reach, reach):
                # A narrower admin's deny over a wider admin's override is theirs to make, not
                # to undo: it keeps the wider reach, so they cannot reset their way past it.
                reach = old.reach
            scoped[tool] = Override(
                state=state, by=actor.key, at=int(time.time() * 1000), reach=reach
            )
            await self.redis.hset(self.key, field, scoped[tool].model_dump_json())
        after = self.resolve(scope, overrides, (tool,)).verdict(tool)
        await self._audit("policy_changed", actor, scope, tool, new, old, effective=after.state)
        return (
            f"{tool} in {scope_label(scope)}: now {describe_state(after.state)} "
            f"({after.source}); was {describe_state(before.state)} ({before.source})."
        )

    def _check(
        self,
        scope: str,
        tool: str,
        state: OverrideState | None,
        actor: Actor,
        overrides: Overrides,
        old: Override | None,
    ) -> tuple[str, str | None]:
        """Raise if `actor` may not make this change; else how far `actor` reaches, and a
        message when there is nothing to do."""
        where = scope_label(scope)
        reach = self.reach(actor, scope)
        if reach is None:
            raise PolicyChangeError(
                f"only admins may change the policy of {where}; {actor.key} is not one"
            )
        if state is None and old is None:
            return reach, f"{tool} has no override in {where}; nothing to reset."
        # Tightening is always allowed; loosening may not undo a wider admin's decision.
        if state != "deny" and old is not None and _wider(old.reach, reach):
            raise PolicyChangeError(
                f"{tool} in {where} was set to {old.state} by {old.by}, an admin of "
                f"{scope_label(old.reach)}; only an admin of that scope may change it"
            )
        if state != "allow":
            return reach, None
        trial = {s: dict(tools) for s, tools in overrides.items()}
        trial.setdefault(scope, {})[tool] = Override(state="allow", by=actor.key, at=0)
        verdict = self.resolve(scope, trial, (tool,)).verdict(tool)
        if verdict.state in ("deny", "off"):
            raise PolicyChangeError(
                f"{tool} stays {describe_state(verdict.state)} in {where}: {verdict.source}; "
                "an allow cannot lift that, so nothing was changed"
            )
        if reach != GLOBAL:
            # Without overrides of admins who reach as far or less: the file and wider admins.
            wider = {s: o for s, o in overrides.items() if _wider(s, reach)}
            verdict = self.resolve(scope, wider, (tool,)).verdict(tool)
            # An MCP tool nobody enabled is off by default, not kept out by a wider admin.
            if verdict.state == "deny" or (verdict.state == "off" and verdict.source != MCP_OFF):
                raise PolicyChangeError(
                    f"{tool} is {describe_state(verdict.state)} in {where} by {verdict.source}; "
                    f"as an admin of {scope_label(reach)} you may not lift that"
                )
        return reach, None

    async def _audit(
        self,
        event: str,
        actor: Actor,
        scope: str,
        tool: str,
        new: str,
        old: Override | None,
        **details: str,
    ) -> None:
        """A change (`policy_changed`) or a refusal (`policy_refused`, with `why`)."""
        if self.audit is not None:
            await self.audit.record(
                event,
                actor=actor.key,
                scope=scope_label(scope),
                tool=tool,
                old=old.state if old else "none",
                new=new,
                **details,
            )
