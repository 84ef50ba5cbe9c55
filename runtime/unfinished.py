"""The calls a dead process left without a result, and what the run's retake (runtime/retake.py)
does with them. Every call is marked in the run journal before its tool starts, with what it
may change (runtime/store/runs.py; `Effects` in runtime/tools/base.py). Of the calls of the
run's last model answer that have no result:

- one without a mark never started (results are saved before every call with side effects,
  and each call is marked before it starts): nothing of it happened;
- one marked as able to run again (it changes nothing, such as a read or a command in the
  read-only sandbox, or its effect is keyed) may have run, but running it again changes
  nothing either;
- one marked otherwise (an approved command, a write, a command without an OS sandbox) may
  have taken effect: its outcome is unknown, and it is never run again.

When none is of the last kind, the retake runs the batch on from its first unanswered call,
through the whole chain again; else that call is answered "outcome unknown" and the others
"interrupted" (the model may ask again). A run whose calls are not marked (an older version
began it) keeps the older rule: its first unanswered call may have been running, and runs
again only when its tool changes nothing whatever the call (a read, a keyed send_file)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.loop import INTERRUPTED, OUTCOME_UNKNOWN, RunState
from runtime.models import AssistantMessage, ToolCall, ToolMessage, ToolResult, ToolStatus
from runtime.store.runs import NOT_STARTED, UNMARKED, CallMark
from runtime.tools.registry import ToolRegistry


@dataclass(frozen=True, slots=True)
class Unfinished:
    """The run's last model answer as a dead process left it."""

    calls: list[ToolCall]  # all its calls
    index: int  # the first without a result
    prior: list[ToolResult]  # the results of calls[:index]
    kinds: dict[str, str]  # call id -> kind (NOT_STARTED, or its mark's), of calls[index:]
    unknown: set[str] = field(default_factory=set)  # those that may have taken effect

    @property
    def again(self) -> bool:
        """Whether running calls[index:] again may change nothing that already happened."""
        return not self.unknown

    def answers(self) -> list[ToolMessage]:
        """Their results when they do not run again."""
        return [
            ToolMessage(
                tool_call_id=call.id,
                name=call.name,
                content=OUTCOME_UNKNOWN if call.id in self.unknown else INTERRUPTED,
                status=ToolStatus.ERROR,
            )
            for call in self.calls[self.index :]
        ]


def unfinished(
    state: RunState, start: int, marks: dict[str, CallMark] | None, registry: ToolRegistry
) -> Unfinished | None:
    """The run's (its turn from the session's index `start`) last model answer, if some of its
    calls have no result; `marks`: the run journal's (None: the run's calls are not marked)."""
    at = next(
        (
            i
            for i in range(len(state.history) - 1, max(0, start - state.base) - 1, -1)
            if isinstance(state.history[i], AssistantMessage)
        ),
        None,
    )
    if at is None:
        return None
    asked = state.history[at]
    assert isinstance(asked, AssistantMessage)
    answers = {m.tool_call_id: m for m in state.history[at:] if isinstance(m, ToolMessage)}
    index = next((i for i, c in enumerate(asked.tool_calls) if c.id not in answers), None)
    if index is None:
        return None
    prior = [
        ToolResult(
            call_id=m.tool_call_id,
            tool=m.name,
            status=m.status,
            model_text=m.content,
            display=m.content,
        )
        for m in (answers[c.id] for c in asked.tool_calls[:index])
    ]
    left = list(asked.tool_calls[index:])
    kinds = dict.fromkeys((c.id for c in left), NOT_STARTED)
    unknown = set()
    if marks is None:
        tool = registry.resolve(left[0].name)
        kinds[left[0].id] = UNMARKED
        if tool is None or not (tool.parallel_safe or tool.side_effect_free or tool.keyed):
            unknown.add(left[0].id)
    else:
        for call in left:
            mark = marks.get(call.id)
            # A mark from before this answer was recorded is another call's (same id).
            if mark is None or mark.at <= state.base + at:
                continue
            kinds[call.id] = mark.kind
            if not mark.again:
                unknown.add(call.id)
    return Unfinished(list(asked.tool_calls), index, prior, kinds, unknown)
