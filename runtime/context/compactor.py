"""Bounded context: a conversation over its budget has its oldest turns compacted into a summary
the model writes (one extra model call), stored durably under the session's key (see
runtime/store/summary.py) and audited. Later runs read only the summary and the history after
it, so what a run reads and sends costs the same at any length of history.

Compaction never touches history itself: a crash during it (or a model or Redis error) loses
nothing and duplicates nothing; the run goes on with what it has (the view cut to the budget,
said in it) and the next step or run tries again. A summary is written only over the one it
was built from, together with the index it covers, so two compactions cannot both land.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runtime.audit import AuditLog
from runtime.context.budget import (
    DEFAULT_BUDGET,
    Budget,
    View,
    build,
    cut_point,
    message_chars,
    trimmed,
)
from runtime.models import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from runtime.providers.base import SUMMARY_PROMPT
from runtime.store.history import HistoryStore
from runtime.store.summary import Summary, SummaryStore
from runtime.trace_context import current_trace_id
from runtime.tracing import hooks as tracing

if TYPE_CHECKING:
    from runtime.providers.base import Provider

log = logging.getLogger(__name__)


def transcript_line(message: Message, index: int, limit: int) -> str:
    """One message as the summarizer reads it, with its index in the session's history."""
    if isinstance(message, UserMessage):
        who = f" ({message.actor})" if message.actor else ""
        return f"[{index}] user{who}: {message.content}"
    if isinstance(message, ToolMessage):
        text = message.content
        if len(text) > limit:
            text = f"{text[:limit]} [… {len(text) - limit} more characters]"
        return f"[{index}] {message.name} result ({message.status.value}): {text}"
    if isinstance(message, AssistantMessage):
        calls = "".join(f"\n  calls {c.name} {c.arguments}" for c in message.tool_calls)
        return f"[{index}] assistant: {message.content or ''}{calls}"
    return f"[{index}] system: {message.content}"


def transcript(messages: Sequence[Message], start: int, room: int, limit: int) -> tuple[str, int]:
    """The newest of `messages` (the session's from index `start`) that fit in `room`
    characters, as lines; and how many older ones did not fit (left out)."""
    lines: list[str] = []
    used = 0
    for i in range(len(messages) - 1, -1, -1):
        line = transcript_line(messages[i], start + i, limit)[:room]  # one huge message too
        if lines and used + len(line) > room:
            return "\n".join(reversed(lines)), i + 1
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines)), 0


class Compactor:
    def __init__(
        self, provider: Provider, store: SummaryStore, audit: AuditLog | None = None
    ) -> None:
        self.provider = provider
        self.store = store
        self.audit = audit

    async def compact(
        self, session: str, view: View, sizes: Sequence[int], budget: Budget
    ) -> Summary | None:
        """A new summary standing for the view's older turns, written (or one another process
        wrote meanwhile); None when there is nothing to compact or it failed (said in the
        log). Never raises an Exception: compacting is never worth failing a run for."""
        try:
            return await self._compact(session, view, sizes, budget)
        except Exception as exc:  # the model or Redis: the run goes on, the next step retries
            log.warning(
                "session %s: context not compacted (%s: %s)", session, type(exc).__name__, exc
            )
            return None

    async def _compact(
        self, session: str, view: View, sizes: Sequence[int], budget: Budget
    ) -> Summary | None:
        window = view.messages[1:]
        cut = cut_point(window, sizes, budget.keep)
        # Worth a model call only when it takes a good part of the budget away: not when the
        # bulk is the current turn itself (one huge answer), which no summary makes smaller.
        if cut is None or sum(sizes[:cut]) < budget.chars // 8:
            return None
        previous = await self.store.current(session)
        since = previous.upto if previous is not None else 0
        if since != view.start:
            # Another process compacted meanwhile: use its summary if this run holds what
            # follows it (a run never drops messages it has not seen summarized).
            end = view.start + len(window)
            return previous if previous is not None and view.start < since <= end else None
        evicted = window[:cut]
        room = budget.chars - (len(previous.text) if previous else 0)
        lines, omitted = transcript(evicted, since, room, budget.old_result_chars)
        prompt: list[Message] = [
            SystemMessage(content=SUMMARY_PROMPT),
            UserMessage(content=self._request(previous, lines, omitted, budget)),
        ]
        with tracing.compaction(since, since + cut, cut, sum(sizes[:cut])) as span:
            answer = await self.provider.complete(prompt, [])
            text = (answer.content or "").strip()[: budget.summary_chars]
            if not text:
                log.warning("session %s: context not compacted (an empty summary)", session)
                return None
            summary = Summary(
                upto=since + cut,
                since=since,
                text=text,
                omitted=omitted,
                chars=sum(sizes[:cut]),
                model=self.provider.name,
                at=int(time.time() * 1000),
                trace=current_trace_id(),
            )
            written = await self.store.write(session, summary)
            if span is not None:
                span.set(summary_chars=len(text), omitted=omitted or None, written=written)
        if not written:
            log.info("session %s: another summary landed first", session)
            return None
        if self.audit is not None:
            await self.audit.record(
                "context_compacted",
                "runtime",
                session=session,
                since=since,
                upto=summary.upto,
                chars=summary.chars,
                summary_chars=len(text),
                omitted=omitted or None,
                model=summary.model,
            )
            await self.audit.flush()  # with the summary, not at the run's end (it may die first)
        log.info("session %s: history up to %d compacted", session, summary.upto)
        return summary

    @staticmethod
    def _request(previous: Summary | None, lines: str, omitted: int, budget: Budget) -> str:
        before = previous.text if previous is not None else "(none: this is the first summary)"
        skipped = ""
        if omitted:
            skipped = f"\n({omitted} older messages did not fit here and are left out.)"
        return (
            f"Summary so far:\n{before}\n\nMessages that follow it:{skipped}\n{lines}\n\n"
            f"Write the new summary in at most {budget.summary_chars} characters."
        )


class Context:
    """What a run sends the model of its history: the view within the budget, compacting the
    oldest turns first when it is over (with a `compactor`; without one, or when that fails,
    the oldest turns are left out of this request, saying so)."""

    def __init__(self, budget: Budget | None = None, compactor: Compactor | None = None) -> None:
        self.budget = budget or Budget()
        self.compactor = compactor

    async def view(
        self,
        system: SystemMessage,
        session: str,
        history: Sequence[Message],
        base: int,
        summary: Summary | None,
    ) -> tuple[View, Summary | None]:
        """The view of `history` (the session's from index `base`), and the summary it is
        built on (a new one when this compacted)."""
        view, sizes = build(system, history, base, summary, self.budget)
        if view.chars <= self.budget.chars:
            return view, summary
        if self.compactor is not None:
            newer = await self.compactor.compact(session, view, sizes, self.budget)
            if newer is not None:
                summary = newer
                view, sizes = build(system, history, base, summary, self.budget)
        if view.chars > self.budget.chars:
            view = trimmed(view, sizes, self.budget)
        return view, summary


def compacting(
    provider: Provider, history: HistoryStore, budget: int, audit: AuditLog | None
) -> Context:
    """A run's context: `budget` characters, compacted by `provider`, the summaries stored
    beside `history`."""
    store = SummaryStore(history.redis, history.keys)
    return Context(Budget(budget), Compactor(provider, store, audit))


__all__ = ["DEFAULT_BUDGET", "Budget", "Compactor", "Context", "compacting", "message_chars"]
