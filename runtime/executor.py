"""Runs one batch of tool calls from the model: resolve, validate, dedupe, schedule, chain."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from pydantic import ValidationError

from runtime.audit import AuditLog, arguments_digest
from runtime.canonical import (
    UNKNOWN_TOOL,
    canonical_arguments,
    canonical_json,
    strip_markers,
    tool_fields,
)
from runtime.channel import Event, ToolFinished, ToolStarted
from runtime.error_codes import tool_error_code
from runtime.evidence_keys import KeyRing
from runtime.metrics import TOOL_CALLS
from runtime.middleware.chain import Middleware, ToolInvocation, build_chain
from runtime.models import PolicyDecision, ToolCall, ToolResult, ToolStatus
from runtime.outputs import keep
from runtime.ownership.lease import LeaseLapsed, guard
from runtime.receipts import Receipt, for_result
from runtime.redact import one_line, redact_text
from runtime.tools.base import Effects, ToolCancelled, ToolContext, ToolError
from runtime.tools.clarify import ClarifyTool
from runtime.tools.registry import ToolRegistry
from runtime.tracing import hooks as tracing

log = logging.getLogger(__name__)

NO_OUTPUT = "(no output)"
INVALID = "invalid_arguments"
# A known tool the process does not run here: CLAWGATE_ENABLED_TOOLS (or, for an MCP tool,
# the policy) leaves it out, so the model was not offered it either.
NOT_ENABLED = PolicyDecision(verdict="deny", source="settings", rule="not enabled")
# Parallel-safe calls of one batch run at once, at most (CLAWGATE_MAX_PARALLEL_TOOLS).
DEFAULT_MAX_PARALLEL = 8
DISPLAY_CHARS = 200
Emit = Callable[[Event], Awaitable[None]]
# Records the batch's results so far (in history) before a call with side effects runs.
Save = Callable[[Sequence[ToolResult]], Awaitable[None]]
# Records that a call is about to run, and what it may change (the run journal's mark).
Started = Callable[[ToolCall, Effects], Awaitable[None]]
Entry = dict[str, str]  # an audit entry, as AuditLog.entry builds it


@dataclass(slots=True)
class BatchOutcome:
    """Results of the calls run, in the model's order. When a call was suspended, processing
    stopped there: `results` ends with the suspended call, whose batch index is
    `suspended_at`, and the calls after it were not touched."""

    results: list[ToolResult]
    suspended_at: int | None = None

    @property
    def cancelled(self) -> bool:
        return any(r.status is ToolStatus.CANCELLED for r in self.results)


def _error(
    call: ToolCall, text: str, status: ToolStatus = ToolStatus.ERROR, code: str | None = None
) -> ToolResult:
    """`code`: the failure's (runtime/error_codes.py), where its status does not say it."""
    return ToolResult(
        call_id=call.id,
        tool=call.name,
        status=status,
        model_text=text,
        display=text,
        error_code=code,
    )


def _validation_message(tool: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"invalid arguments for {tool}: " + "; ".join(problems)


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        max_result_chars: int = 16_000,
        emit: Emit | None = None,
        audit: AuditLog | None = None,
        middlewares: Sequence[Middleware] = (),
        started: Started | None = None,
        keys: KeyRing | None = None,
        max_parallel: int = DEFAULT_MAX_PARALLEL,
    ) -> None:
        """`middlewares`: the chain every call runs through, in order (see
        runtime.middleware.default_chain); `started`: told of each call before its tool runs,
        with what it may change (its access decided by the chain); `keys`: what each
        completed call's receipt is made with (runtime/receipts.py; default unkeyed);
        `max_parallel`: parallel-safe calls run at once, at most (1: one at a time)."""
        self.registry = registry
        self.keys = keys or KeyRing()
        self.max_parallel = max(1, max_parallel)
        self.started = started
        self.middlewares = tuple(middlewares)
        self.max_result_chars = max_result_chars
        self.emit = emit
        self.audit = audit

    def prepare(self, call: ToolCall, ctx: ToolContext) -> ToolInvocation | ToolResult:
        """Resolve and validate a call; an error result means nothing may run."""
        tool = self.registry.resolve(call.name)
        if tool is None:
            if self.registry.known(call.name):
                refused = _error(call, f"tool {call.name!r} is not enabled here", ToolStatus.DENIED)
                refused.policy = NOT_ENABLED
                return refused
            names = ", ".join(t.name for t in self.registry.active()) or "none"
            text = f"unknown tool {call.name!r}; available tools: {names}"
            return _error(call, text, code="unknown_tool")
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            text = f"arguments for {call.name} are not valid JSON: {exc.msg}"
            return _error(call, text, code=INVALID)
        if not isinstance(raw, dict):
            return _error(call, f"arguments for {call.name} must be a JSON object", code=INVALID)
        try:
            args = tool.args_model.model_validate(strip_markers(raw))
        except ValidationError as exc:
            return _error(call, _validation_message(call.name, exc), code=INVALID)
        return ToolInvocation(call=call, tool=tool, args=args, context=ctx)

    async def execute(
        self,
        calls: Sequence[ToolCall],
        ctx: ToolContext,
        *,
        start: int = 0,
        prior: Sequence[ToolResult] = (),
        grants: Mapping[str, str] | None = None,
        save: Save | None = None,
    ) -> BatchOutcome:
        """Run `calls[start:]`; `prior` are the results of `calls[:start]` (a resumed batch)
        and `grants` maps call ids to the approval that lets them through the chain. `save`
        is given the results of `calls[start:]` so far before each call with side effects."""
        if self.audit is None:
            outcome = await self._execute(calls, ctx, start, prior, grants, save)
        else:
            async with self.audit.unit():  # the batch's records in one round trip
                outcome = await self._execute(calls, ctx, start, prior, grants, save)
        for result in outcome.results:
            # Names the model made up would grow the label set without bound.
            tool = result.tool if self.registry.known(result.tool) else UNKNOWN_TOOL
            TOOL_CALLS.labels(tool, result.status.value).inc()
        return outcome

    async def _execute(
        self,
        calls: Sequence[ToolCall],
        ctx: ToolContext,
        start: int,
        prior: Sequence[ToolResult],
        grants: Mapping[str, str] | None,
        save: Save | None,
    ) -> BatchOutcome:
        prepared = [self.prepare(call, ctx) for call in calls]
        for item in prepared:
            if isinstance(item, ToolInvocation) and grants and item.call.id in grants:
                item.grant = grants[item.call.id]
        duplicate_of = duplicates_in(prepared)

        if len(prior) != start:
            raise ValueError("a resumed batch needs exactly one prior result per call before start")
        results: list[ToolResult] = list(prior)
        i = start
        while i < len(prepared):
            if ctx.cancelled.is_set():
                results.extend(
                    _error(c, "the run was cancelled before this call", ToolStatus.CANCELLED)
                    for c in calls[i:]
                )
                break
            group = self._parallel_group(prepared, duplicate_of, i)
            if len(group) > 1:
                ran = await self._together(group, i)
                for offset, (result, entry) in enumerate(ran):
                    self._keep(entry)  # in the model's order, whatever finished first
                    results.append(result)
                    if result.status is ToolStatus.SUSPENDED:
                        # Its side-effect-free neighbours after it run again on resume.
                        return BatchOutcome(results[start:], suspended_at=i + offset)
                i += len(group)
                continue
            item = prepared[i]
            if i in duplicate_of:
                result = duplicate(results[duplicate_of[i]], calls[i])
                tracing.tool_result(calls[i], i, canonical_arguments, result)
            elif isinstance(item, ToolResult):
                result = self._shape(item)
                self._keep(self._evidence(calls[i], ctx, result)[0])
                known = self.registry.known(calls[i].name)
                tracing.tool_result(calls[i], i, canonical_arguments, result, known)
                await self._emit(ToolFinished(item.call_id, item.tool, item.status, result.display))
            else:
                await self._before(item, save, results[start:])
                result, entry = await self._run_one(item, i)
                self._keep(entry)
            results.append(result)
            if result.status is ToolStatus.SUSPENDED:
                return BatchOutcome(results[start:], suspended_at=i)
            i += 1
        return BatchOutcome(results[start:])

    async def judge(
        self, calls: Sequence[ToolCall], ctx: ToolContext, start: int, most: int
    ) -> list[tuple[int, ToolResult]]:
        """The calls from `start` on that would wait for a human, without running any: each
        goes through the chain to its end, which answers in the tool's stead. Up to `most`,
        and not past a question (the clarify tool's call stays alone: it is asked after)."""
        waiting: list[tuple[int, ToolResult]] = []
        prepared = [self.prepare(call, ctx) for call in calls]
        duplicate_of = duplicates_in(prepared)
        for i in range(start, len(calls)):
            item = prepared[i]
            if isinstance(item, ToolResult) or i in duplicate_of:
                continue  # refused as it is, or answered by the call it repeats
            item.judging = True
            try:
                result = await build_chain(self.middlewares, _judged)(item)
            except LeaseLapsed:
                raise
            except Exception:  # fail closed: not batched, judged again when its turn comes
                log.exception("judging %s for its batch failed", item.call.name)
                break
            if result.status is not ToolStatus.SUSPENDED:
                continue
            if item.tool.name == ClarifyTool.name or len(waiting) == most:
                break
            waiting.append((i, result))
        return waiting

    def _parallel_group(
        self, prepared: list[ToolInvocation | ToolResult], duplicate_of: dict[int, int], start: int
    ) -> list[ToolInvocation]:
        """The parallel-safe calls from `start` on that may run together (none when they run
        one at a time: then each goes the sequential way)."""
        group: list[ToolInvocation] = []
        if self.max_parallel == 1:
            return group
        for j in range(start, len(prepared)):
            item = prepared[j]
            if (
                not isinstance(item, ToolInvocation)
                or not item.tool.parallel_safe
                or j in duplicate_of
            ):
                break
            group.append(item)
        return group

    async def _together(
        self, group: Sequence[ToolInvocation], first: int
    ) -> list[tuple[ToolResult, Entry | None]]:
        """Run a group of parallel-safe calls (batch indexes from `first`), at most
        `max_parallel` at once, started in the model's order; their outcomes in that order."""
        gate = asyncio.Semaphore(self.max_parallel)

        async def one(invocation: ToolInvocation, index: int) -> tuple[ToolResult, Entry | None]:
            async with gate:
                return await self._run_one(invocation, index)

        return await asyncio.gather(*(one(v, first + k) for k, v in enumerate(group)))

    async def _run_one(
        self, invocation: ToolInvocation, index: int = 0
    ) -> tuple[ToolResult, Entry | None]:
        """Run one call through the chain: its result, and its audit entry for the caller to
        keep in call order."""
        tool, call = invocation.tool, invocation.call
        span = tracing.tool_started(call, index, canonical_arguments)
        summary = redact_text(tool.summarize(invocation.args))
        await self._emit(ToolStarted(call.id, tool.name, summary))
        chain = build_chain(self.middlewares, self._invoke_tool)
        began = time.perf_counter()
        try:
            with tracing.inside(span):
                result = await self._kept(self._shape(await chain(invocation)), invocation)
        except LeaseLapsed:
            raise  # not "not executed": the job is tried again once the lease is renewed
        except Exception as exc:
            # Fail closed: a broken policy check (or Redis going away) means "do not run".
            log.exception("tool chain failed for %s", call.name)
            text = f"not executed: {type(exc).__name__} while checking the call"
            result = _error(call, text, code="check_failed")
        elapsed = (time.perf_counter() - began) * 1000
        ctx, grant = invocation.context, invocation.grant
        entry, receipt = self._evidence(call, ctx, result, elapsed, grant)
        tracing.tool_finished(span, result, grant, None if receipt is None else receipt.id)
        log.info("session %s: %s %s", invocation.context.session, tool.name, result.status.value)
        await self._emit(ToolFinished(call.id, tool.name, result.status, result.display))
        return result, entry

    async def _invoke_tool(self, invocation: ToolInvocation) -> ToolResult:
        """The end of the chain: re-resolve the tool (policy may have changed) and run it."""
        call = invocation.call
        tool = self.registry.resolve(call.name)
        if tool is None:
            return _error(call, f"tool {call.name!r} is no longer enabled", ToolStatus.DENIED)
        await guard()  # never run by a process whose job was taken over while it stalled
        ctx = replace(invocation.context, call_id=call.id)
        if self.started is not None:
            await self.started(call, tool.effects(ctx))
        try:
            output = await tool.run(invocation.args, ctx)
        except ToolCancelled as exc:
            return _error(call, f"{call.name} cancelled: {exc}", ToolStatus.CANCELLED)
        except ToolError as exc:
            return _error(call, f"{call.name} failed: {exc}", code=exc.code)
        except Exception as exc:
            log.exception("tool %s crashed", call.name)
            text = f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}"
            return _error(call, text, code="tool_crashed")
        return ToolResult(
            call_id=call.id,
            tool=call.name,
            status=ToolStatus.COMPLETED,
            model_text=output.text,
            display=output.display or tool.summarize(invocation.args),
            audit=dict(output.audit),
            error_code=output.error_code,
        )

    def _shape(self, result: ToolResult) -> ToolResult:
        """Empty output becomes `(no output)`; long output is cut for the model and kept whole;
        the chat display stays one short line, with secrets masked like the arguments."""
        display = one_line(redact_text(result.display), DISPLAY_CHARS)
        if display != result.display:
            result = result.model_copy(update={"display": display})
        text = result.model_text
        if not text.strip():
            return result.model_copy(update={"model_text": NO_OUTPUT})
        if len(text) <= self.max_result_chars:
            return result
        cut = text[: self.max_result_chars] + self._cut_note(len(text))
        return result.model_copy(update={"model_text": cut, "artifact": text})

    def _cut_note(self, whole: int, kept: str | None = None) -> str:
        where = (
            f"; the whole output is in {kept}: read the rest with the read tool (offset and "
            "limit count lines)"
            if kept
            else ""
        )
        return f"\n[output cut at {self.max_result_chars} of {whole} characters{where}]"

    async def _kept(self, result: ToolResult, invocation: ToolInvocation) -> ToolResult:
        """A cut result with its whole output written to the work dir (redacted), and the
        model told where, so that it can read the rest."""
        if result.artifact is None:
            return result
        ctx = invocation.context
        kept = await keep(ctx.workdir, ctx.session, invocation.call.id, result.artifact)
        if kept is None:
            return result
        cut = result.artifact[: self.max_result_chars]
        return result.model_copy(
            update={"model_text": cut + self._cut_note(len(result.artifact), kept)}
        )

    async def _emit(self, event: Event) -> None:
        if self.emit is not None:
            await self.emit(event)

    def _keep(self, entry: Entry | None) -> None:
        if entry is not None and self.audit is not None:
            self.audit.keep(entry)

    def _evidence(
        self,
        call: ToolCall,
        ctx: ToolContext,
        result: ToolResult,
        duration_ms: float | None = None,
        approval: str | None = None,
    ) -> tuple[Entry | None, Receipt | None]:
        """The audit entry of a call that went through the chain (or failed to prepare), and
        its receipt when it completed (runtime/receipts.py; recorded in the entry): its status
        and duration; of its arguments only a hash and the key names, never the values. No
        audit trail: neither (a receipt is verified against the entry that records it)."""
        if self.audit is None:
            return None, None
        try:
            digest, keys = arguments_digest(canonical_arguments(call))
            receipt = for_result(self.keys, result, digest, ctx.session, approval)
            entry = self.audit.entry(
                "tool_executed",
                ctx.actor.key if ctx.actor else "",
                session=ctx.session,
                conversation=ctx.conversation.id if ctx.conversation else None,
                **tool_fields(call.name, self.registry.known(call.name)),
                call=call.id,
                status=result.status.value,
                duration_ms=None if duration_ms is None else round(duration_ms, 1),
                args_sha256=digest,
                arg_keys=keys or None,
                approval=approval,
                policy_source=result.policy.source if result.policy else None,
                error_code=tool_error_code(result),
                **result.audit,
                **({} if receipt is None else receipt.audit_fields()),
            )
            return entry, receipt
        except Exception as exc:  # the call has run: auditing it must not fail the run
            log.warning("audit: a tool_executed entry was not recorded: %s", type(exc).__name__)
            return None, None

    async def _before(
        self, invocation: ToolInvocation, save: Save | None, done: Sequence[ToolResult]
    ) -> None:
        """Before a call that is not parallel-safe, write what is held: the calls before it
        may have had side effects, and their audit records and results must not wait for (and
        be lost with) a long call during which the process may die. A crash during this call
        then leaves it the first unanswered one (see Runtime's retake)."""
        if invocation.tool.parallel_safe:
            return
        if self.audit is not None:
            await self.audit.flush()
        if save is not None:
            await save(done)


async def _judged(invocation: ToolInvocation) -> ToolResult:
    """The chain's end while judging: the call would run (it does not)."""
    return _error(invocation.call, "(judged only)", ToolStatus.COMPLETED)


def duplicates_in(prepared: Sequence[ToolInvocation | ToolResult]) -> dict[int, int]:
    """Index of each identical repeat -> index of its first occurrence in the batch."""
    first_of: dict[str, int] = {}
    duplicate_of: dict[int, int] = {}
    for i, item in enumerate(prepared if len(prepared) > 1 else ()):
        if not isinstance(item, ToolInvocation):
            continue
        key = item.tool.name + canonical_json(item.args.model_dump(mode="json"))
        if key in first_of:
            duplicate_of[i] = first_of[key]
            continue
        if not item.tool.parallel_safe:
            first_of.clear()  # a side effect in between: a repeated read is a new read
        first_of[key] = i
    return duplicate_of


def duplicate(original: ToolResult, call: ToolCall) -> ToolResult:
    note = f"(identical to call {original.call_id}, which ran once)"
    return original.model_copy(
        update={
            "call_id": call.id,
            "model_text": f"{note}\n{original.model_text}",
            "display": f"{original.display} {note}",
        }
    )
