"""Asking the hooks that apply to a call, at once, and combining their answers: the strictest
wins (deny, then ask, then allow). A hook that gives no usable answer (a timeout, a crash, a
non-zero exit, garbage) counts as an ask, never as an allow nor a silent deny. Every answer
and failure is audited with the hook's name.

Answers may be kept `cache_seconds` in this process, keyed by the hook (its whole
configuration) and the whole input it was sent, so an answer is never reused for another
question. In process rather than in Redis: no round trip is added to a hooked call, and no
shared entry exists that could turn into an allow elsewhere; several workers each ask a hook
at most once per call signature and window."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.audit import AuditLog
from runtime.canonical import canonical_json, text_sha256
from runtime.hooks.answer import Decision, HookAnswer, HookFailure, parse_answer
from runtime.hooks.transport import ask
from runtime.policy.model import scope_label
from runtime.policy.resolve import ScopedHook

CACHE_ENTRIES = 4096  # answers kept at most; the oldest goes first
STRICTNESS: dict[Decision, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True, slots=True)
class HookCall:
    """What the hooks are asked about: the call, what the built-in policy makes of it, and
    where it was made."""

    tool: str
    arguments: str  # canonical JSON
    reasons: tuple[str, ...]  # the built-in policy's (risk rules, always-ask, containment)
    verdict: Decision  # the built-in policy's: allow or ask (a deny never reaches a hook)
    session: str
    conversation: str
    requester: str
    approved: bool = False  # a human approved it: it is about to run, only a deny stops it
    mode: str = "auto"  # the conversation's (runtime/policy/modes.py)

    def input(self, hook: ScopedHook) -> dict[str, Any]:
        try:
            arguments = json.loads(self.arguments)
        except json.JSONDecodeError:
            arguments = self.arguments  # the model's text, when it was no JSON
        return {
            "hook": hook.name,
            "scope": scope_label(hook.scope),
            "tool": self.tool,
            "arguments": arguments,
            "reasons": list(self.reasons),
            "verdict": self.verdict,
            "approved": self.approved,
            "session": self.session,
            "conversation": self.conversation,
            "requester": self.requester,
            "mode": self.mode,
        }


@dataclass(frozen=True, slots=True)
class HookVerdict:
    """The hooks' combined answer. `reasons` name each hook that denied or asked (or failed);
    an ask's `quorum` and `routes` are the highest and all of theirs."""

    decision: Decision
    reasons: tuple[str, ...] = ()
    quorum: int = 1
    routes: tuple[str, ...] = ()
    allowed_by: tuple[str, ...] = ()  # the hooks, when every one allowed
    decided_by: tuple[str, ...] = ()  # the hooks that denied or asked (or failed)

    @property
    def names(self) -> str:
        """The hooks whose answer this is, for traces."""
        return ",".join(self.allowed_by or self.decided_by)


Outcome = HookAnswer | HookFailure


def combine(outcomes: Iterable[tuple[ScopedHook, Outcome]]) -> HookVerdict:
    """The strictest answer; a failure counts as an ask."""
    listed = list(outcomes)
    answers = [
        (hook, HookAnswer(decision="ask") if isinstance(got, HookFailure) else got, got)
        for hook, got in listed
    ]
    decision = max((a.decision for _, a, _ in answers), key=STRICTNESS.__getitem__)
    if decision == "allow":
        return HookVerdict("allow", allowed_by=tuple(hook.name for hook, _ in listed))
    chosen = [(hook, a, got) for hook, a, got in answers if a.decision == decision]
    reasons = tuple(_reason(hook, got) for hook, _, got in chosen)
    by = tuple(hook.name for hook, _, _ in chosen)
    if decision == "deny":
        return HookVerdict("deny", reasons, decided_by=by)
    return HookVerdict(
        "ask",
        reasons,
        quorum=max(a.quorum for _, a, _ in chosen),
        routes=tuple(dict.fromkeys(r for _, a, _ in chosen for r in a.route)),
        decided_by=by,
    )


def _reason(hook: ScopedHook, outcome: Outcome) -> str:
    if isinstance(outcome, HookFailure):
        return f"hook {hook.name} failed ({outcome}); a human decides"
    verb = "refuses it" if outcome.decision == "deny" else "asks for approval"
    said = outcome.shown_reason()
    return f"hook {hook.name} {verb}" + (f": {said}" if said else "")


class HookJudge:
    def __init__(
        self, audit: AuditLog | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """`audit`: where each answer and failure is recorded (None: nowhere)."""
        self.audit = audit
        self.clock = clock
        self._cache: dict[str, tuple[float, HookAnswer]] = {}

    async def judge(self, hooks: Sequence[ScopedHook], call: HookCall) -> HookVerdict:
        """The combined answer of `hooks` (at least one) on `call`, asked at once."""
        outcomes = await asyncio.gather(*(self._ask(hook, call) for hook in hooks))
        return combine(zip(hooks, outcomes, strict=True))

    async def _ask(self, hook: ScopedHook, call: HookCall) -> Outcome:
        payload = canonical_json({"input": call.input(hook)})
        key = hashlib.sha256(f"{hook.config.model_dump_json()}\n{payload}".encode()).hexdigest()
        outcome: Outcome | None = self._cached(key)
        cached = outcome is not None
        if outcome is None:
            outcome = await self._fresh(hook, payload.encode())
            if isinstance(outcome, HookAnswer) and hook.config.cache_seconds > 0:
                self._keep(key, outcome, hook.config.cache_seconds)
        await self._audit(hook, call, outcome, cached)
        return outcome

    @staticmethod
    async def _fresh(hook: ScopedHook, payload: bytes) -> Outcome:
        try:
            async with asyncio.timeout(hook.config.timeout):
                return parse_answer(await ask(hook.config, payload))
        except TimeoutError:
            return HookFailure(f"no answer within {hook.config.timeout:g} s")
        except HookFailure as failure:
            return failure
        except Exception as exc:  # fail closed on anything: never an allow by accident
            return HookFailure(f"could not be asked ({type(exc).__name__})")

    def _cached(self, key: str) -> HookAnswer | None:
        found = self._cache.get(key)
        if found is None:
            return None
        if found[0] <= self.clock():
            del self._cache[key]
            return None
        return found[1]

    def _keep(self, key: str, answer: HookAnswer, seconds: float) -> None:
        if len(self._cache) >= CACHE_ENTRIES:
            del self._cache[next(iter(self._cache))]
        self._cache[key] = (self.clock() + seconds, answer)

    async def _audit(
        self, hook: ScopedHook, call: HookCall, outcome: Outcome, cached: bool
    ) -> None:
        if self.audit is None:
            return
        where = {
            "hook": hook.name,
            "scope": scope_label(hook.scope),
            "tool": call.tool,
            "args_sha256": text_sha256(call.arguments),
            "session": call.session,
            "conversation": call.conversation,
        }
        if isinstance(outcome, HookFailure):
            await self.audit.record("hook_failed", call.requester, **where, why=str(outcome))
            return
        await self.audit.record(
            "hook_decided",
            call.requester,
            **where,
            decision=outcome.decision,
            reason=outcome.shown_reason(),
            cached="yes" if cached else None,
        )
