"""What the model is sent of a history within a budget (runtime/context/budget.py), and the
demo model's deterministic summary."""

from __future__ import annotations

import asyncio

from runtime.context.budget import Budget, build, cut_point, message_chars, trimmed
from runtime.context.compactor import transcript
from runtime.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolStatus,
    UserMessage,
)
from runtime.providers.base import SUMMARY_PROMPT
from runtime.providers.demo import DemoProvider
from runtime.store.summary import Summary

SYSTEM = SystemMessage(content="system prompt")


def turn(i: int, output: str = "out") -> list[Message]:
    call = ToolCall(id=f"c{i}", name="bash", arguments='{"command": "ls"}')
    return [
        UserMessage(content=f"ask {i}"),
        AssistantMessage(tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name="bash", content=output, status=ToolStatus.COMPLETED),
        AssistantMessage(content=f"answer {i}"),
    ]


def test_the_cut_falls_before_a_user_message_and_never_before_a_tool_result() -> None:
    history = [m for i in range(10) for m in turn(i)]
    sizes = [message_chars(m) for m in history]
    cut = cut_point(history, sizes, keep=sum(sizes[-6:]))
    assert cut is not None and isinstance(history[cut], UserMessage)
    assert sum(sizes[cut:]) <= sum(sizes[-6:])
    # One long run, no user message to cut at: a model answer starts what is kept.
    run: list[Message] = [UserMessage(content="go")]
    for i in range(6):
        call = ToolCall(id=f"r{i}", name="read", arguments="{}")
        run += [
            AssistantMessage(tool_calls=[call]),
            ToolMessage(
                tool_call_id=call.id, name="read", content="x" * 100, status=ToolStatus.COMPLETED
            ),
        ]
    sizes = [message_chars(m) for m in run]
    cut = cut_point(run, sizes, keep=300)
    assert cut is not None and isinstance(run[cut], AssistantMessage)
    # Nothing before the first message can be cut.
    assert cut_point(run[:1], sizes[:1], keep=0) is None


def test_old_tool_results_are_cut_with_a_pointer_and_the_current_turn_is_whole() -> None:
    budget = Budget(10_000)
    big = "y" * 5_000
    history = [*turn(0, big), *turn(1, big)[:3]]  # the second turn is the current one
    view, sizes = build(SYSTEM, history, 40, None, budget)
    old, current = view.messages[3], view.messages[7]
    assert isinstance(old, ToolMessage) and isinstance(current, ToolMessage)
    assert old.content.startswith("y" * budget.old_result_chars)
    assert "full result is message 42 of this conversation's history" in old.content
    assert current.content == big
    assert view.start == 40 and view.chars == len(SYSTEM.content) + sum(sizes)


def test_the_summary_joins_the_system_prompt_and_the_window_starts_where_it_ends() -> None:
    history = [m for i in range(5) for m in turn(i)]
    summary = Summary(upto=108, since=0, text="SUMMARY TEXT")
    view, _ = build(SYSTEM, history, 100, summary, Budget())
    head = view.messages[0]
    assert isinstance(head, SystemMessage)
    assert head.content.startswith("system prompt") and "SUMMARY TEXT" in head.content
    assert "108 earlier messages" in head.content
    assert view.start == 108 and view.messages[1:] == history[8:]


def test_over_the_budget_without_a_summary_the_oldest_turns_are_left_out_saying_so() -> None:
    budget = Budget(3_000)
    history = [m for i in range(40) for m in turn(i)]
    view, sizes = build(SYSTEM, history, 0, None, budget)
    assert view.chars > budget.chars
    cut = trimmed(view, sizes, budget)
    assert cut.chars <= budget.chars
    assert isinstance(cut.messages[1], UserMessage)
    assert "earlier messages are not shown here" in str(cut.messages[0].content)
    assert cut.messages[-1] == history[-1] and cut.start > 0


def test_the_summarizer_gets_the_newest_messages_that_fit_and_counts_the_rest() -> None:
    history = [m for i in range(50) for m in turn(i)]
    text, omitted = transcript(history, 1_000, room=400, limit=50)
    assert omitted > 0 and len(text) <= 400 + 100
    assert text.splitlines()[-1] == "[1199] assistant: answer 49"
    whole, none_left = transcript(history[:4], 0, room=10_000, limit=50)
    assert none_left == 0 and whole.splitlines()[0] == "[0] user: ask 0"


def test_the_demo_model_summarizes_deterministically() -> None:
    request = (
        "Summary so far:\n(demo summary) The user asked, latest last:\n- [3] first thing\n\n"
        "Messages that follow it:\n[10] user (slack:U1): second thing\n[11] assistant: ok"
    )
    messages: list[Message] = [
        SystemMessage(content=SUMMARY_PROMPT),
        UserMessage(content=request),
    ]
    answers = [asyncio.run(DemoProvider().complete(messages, [])) for _ in range(2)]
    assert answers[0] == answers[1]
    assert answers[0].content == (
        "(demo summary) The user asked, latest last:\n- [3] first thing\n- [10] second thing"
    )
