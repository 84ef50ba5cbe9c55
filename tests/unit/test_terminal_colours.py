"""Colours at a terminal (adapters/console/channel.py): a request yellow, a decision that
lets a call run green, one that does not red; plain with NO_COLOR, in a pipe, and never a
colour code that came from the call itself."""

from __future__ import annotations

import asyncio
import io
from dataclasses import replace

import pytest

from adapters.console.channel import ASKS, BAD, GOOD, RESET, ConsoleChannel
from runtime.channel import ApprovalRequested, ApprovalUpdated, Event
from runtime.models import ConversationRef
from tests.unit.test_status_words import notice

HERE = ConversationRef(platform="console", id="console:t")
NOTICE = replace(notice("pending"), arguments="echo \x1b[2Jwiped")


class Screen(io.StringIO):
    """A terminal's output above the prompt: what it escapes, and what it takes styled."""

    def __init__(self) -> None:
        super().__init__()
        self.styled: list[str] = []

    def write_styled(self, data: str) -> int:
        self.styled.append(data)
        return len(data)

    def isatty(self) -> bool:
        return True


def shown(event: Event) -> Screen:
    screen = Screen()
    asyncio.run(ConsoleChannel(screen).send(HERE, event))
    return screen


def test_a_request_is_yellow_and_a_decision_green_or_red(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    (asked,) = shown(ApprovalRequested(NOTICE)).styled
    assert asked.startswith(f"{ASKS}[approval needed] bash: echo ") and RESET in asked
    assert "\x1b[2J" not in asked  # the call's own escape is shown, never run
    (done,) = shown(ApprovalUpdated(replace(NOTICE, status="consumed"))).styled
    assert done == f"{GOOD}[approval k3x9q2m7vd4pw done]{RESET}\n"
    (no,) = shown(ApprovalUpdated(replace(NOTICE, status="rejected", decided_by="ben"))).styled
    assert no.startswith(f"{BAD}[approval k3x9q2m7vd4pw rejected by ben")


def test_no_color_and_a_pipe_get_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    screen = shown(ApprovalRequested(NOTICE))
    assert screen.styled == [] and screen.getvalue().startswith("[approval needed] bash")
    monkeypatch.delenv("NO_COLOR")
    pipe = io.StringIO()
    asyncio.run(ConsoleChannel(pipe).send(HERE, ApprovalRequested(NOTICE)))
    assert "\x1b[1;33m" not in pipe.getvalue()
