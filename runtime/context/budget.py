"""What the model is sent of a conversation, within a budget of characters (pure functions).

The view of a run: the system prompt (with the context summary, when there is one), then the
history from where the summary ends. Tool results older than the current turn are cut to a
short head with a pointer to the full text (the message's index in the session's history):
the model rarely needs an old listing whole, and one can be many times the rest of a turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.models import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage

if TYPE_CHECKING:  # the settings import this module: it stays light (no Redis client)
    from runtime.store.summary import Summary

DEFAULT_BUDGET = 100_000  # characters, about 25,000 tokens
MIN_BUDGET = 2_000


@dataclass(frozen=True, slots=True)
class Budget:
    """`chars`: the most the model is sent of a conversation (its messages as sent, JSON
    included, the system prompt with the summary too; the tool schemas aside). Over it, the
    oldest turns are compacted until about half of it is left."""

    chars: int = DEFAULT_BUDGET

    @property
    def keep(self) -> int:
        """What a compaction leaves of the recent history: room to grow before the next."""
        return self.chars // 2

    @property
    def summary_chars(self) -> int:
        """The longest summary kept (a longer answer is cut)."""
        return max(200, self.chars // 8)

    @property
    def old_result_chars(self) -> int:
        """Tool results before the current turn are cut at this."""
        return max(200, min(2_000, self.chars // 50))


@dataclass(frozen=True, slots=True)
class View:
    """What the model is sent: `messages` (the system prompt first), their size in characters,
    and `start`, the session's index of the first history message among them."""

    messages: list[Message]
    chars: int
    start: int


FRAME_CHARS = 40  # a message's role, keys and quotes, as sent (generously)
CALL_FRAME_CHARS = 90  # a tool call's type, keys and quotes, its arguments escaped


def message_chars(message: Message) -> int:
    """About what `message` adds to a request, in characters (its text, its calls and their
    ids, and the JSON around them)."""
    size = FRAME_CHARS + len(getattr(message, "content", None) or "")
    if isinstance(message, AssistantMessage):
        for c in message.tool_calls:
            size += CALL_FRAME_CHARS + len(c.id) + len(c.name) + len(c.arguments)
    elif isinstance(message, ToolMessage):
        size += len(message.tool_call_id) + len(message.name)
    return size


def cut_result(message: ToolMessage, index: int, limit: int) -> ToolMessage:
    """`message` cut at `limit` characters, saying where its full text is."""
    text = message.content
    if len(text) <= limit:
        return message
    note = (
        f"\n[cut at {limit} of {len(text)} characters; the full result is message {index} of "
        "this conversation's history]"
    )
    return message.model_copy(update={"content": text[:limit] + note})


def current_turn(messages: Sequence[Message]) -> int:
    """The index of the last user message (0 when there is none): the turn being answered."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], UserMessage):
            return i
    return 0


def shown(messages: Sequence[Message], start: int, budget: Budget) -> list[Message]:
    """`messages` (the session's from index `start`) as the model is shown them: tool results
    before the current turn cut to `budget.old_result_chars`."""
    turn = current_turn(messages)
    limit = budget.old_result_chars
    return [
        cut_result(m, start + i, limit) if i < turn and isinstance(m, ToolMessage) else m
        for i, m in enumerate(messages)
    ]


def with_summary(system: SystemMessage, summary: Summary | None, note: str = "") -> SystemMessage:
    """The system prompt, followed by the summary of what the model is no longer sent (one
    system message: some compatible servers take only one)."""
    if summary is None and not note:
        return system
    parts = [system.content]
    if summary is not None:
        parts.append(
            f"Summary of the {summary.upto} earlier messages of this conversation (they no "
            f"longer fit what you are shown; the full history is kept):\n{summary.text}"
        )
    if note:
        parts.append(note)
    return SystemMessage(content="\n\n".join(parts))


def cut_point(messages: Sequence[Message], sizes: Sequence[int], keep: int) -> int | None:
    """Where to split `messages` so that what follows holds at most about `keep` characters:
    at a user message if one follows that point (a whole turn stays together), else at the
    next model answer (its calls stay with their results), never at a tool result (the model
    API refuses a result without its call). None when no split leaves something before it."""
    kept, first = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        if kept + sizes[i] > keep:
            break
        kept += sizes[i]
        first = i
    for kinds in ((UserMessage,), (UserMessage, AssistantMessage)):
        for i in range(max(first, 1), len(messages)):
            if isinstance(messages[i], kinds):
                return i
    # The newest message alone is over `keep`: split before the last one that may start.
    for i in range(len(messages) - 1, 0, -1):
        if not isinstance(messages[i], ToolMessage):
            return i
    return None


def build(
    system: SystemMessage,
    history: Sequence[Message],
    base: int,
    summary: Summary | None,
    budget: Budget,
) -> tuple[View, list[int]]:
    """The view of a run's history (`history` is the session's from index `base`) with its
    summary, and the size of each history message in it."""
    start = max(base, summary.upto if summary is not None else 0)
    window = shown(history[start - base :], start, budget)
    sizes = [message_chars(m) for m in window]
    head = with_summary(system, summary)
    chars = len(head.content) + sum(sizes)
    return View([head, *window], chars, start), sizes


def trimmed(view: View, sizes: Sequence[int], budget: Budget) -> View:
    """The view cut to the budget by leaving out its oldest turns, saying so: what the model
    is sent when the history is over budget and no (new) summary could be written."""
    head, window = view.messages[0], view.messages[1:]
    assert isinstance(head, SystemMessage)  # what `build` puts first
    room = budget.chars - len(head.content)
    cut = cut_point(window, sizes, max(room, 0))
    if cut is None or cut == 0:
        return view
    note = (
        f"({cut} earlier messages are not shown here: they do not fit what you are shown and "
        "could not be summarized yet.)"
    )
    head = SystemMessage(content=f"{head.content}\n\n{note}")
    chars = len(head.content) + sum(sizes[cut:])
    return View([head, *window[cut:]], chars, view.start + cut)
