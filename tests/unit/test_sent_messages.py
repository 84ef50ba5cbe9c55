"""A run's next model request encodes only the messages its last request did not send
(runtime/providers/sent.py), and the bytes are always those of the whole window."""

from __future__ import annotations

import json
from collections.abc import Sequence

from runtime.models import AssistantMessage, Message, UserMessage
from runtime.providers import sent
from runtime.providers.sent import SentMessages


class Encoder:
    def __init__(self) -> None:
        self.encoded: list[int] = []  # how many messages each call encoded

    def __call__(self, messages: Sequence[Message]) -> bytes:
        self.encoded.append(len(messages))
        return whole(messages)


def whole(messages: Sequence[Message]) -> bytes:
    return json.dumps([m.model_dump(mode="json") for m in messages], separators=(",", ":")).encode()


def window(n: int) -> list[Message]:
    return [
        UserMessage(content=f"m{i}") if i % 2 else AssistantMessage(content=f"a{i}")
        for i in range(n)
    ]


def test_a_step_encodes_only_what_the_window_gained() -> None:
    encoder = Encoder()
    encode = SentMessages(encoder)
    messages = window(400)
    assert encode(messages) == whole(messages)
    messages += [UserMessage(content="new"), AssistantMessage(content="newer")]
    assert encode(messages) == whole(messages)
    assert encode(messages) == whole(messages)  # the same request again: nothing to encode
    assert encoder.encoded == [400, 2]


def test_equal_messages_that_are_other_objects_are_encoded() -> None:
    encoder = Encoder()
    encode = SentMessages(encoder)
    first = window(3)
    encode(first)
    again = [m.model_copy() for m in first]  # as read anew from Redis by the next run
    assert encode(again) == whole(again)
    assert encoder.encoded == [3, 3]


def test_equal_copies_before_the_end_are_not_encoded_again() -> None:
    encoder = Encoder()
    encode = SentMessages(encoder)
    messages = window(10)
    encode(messages)
    # Each step makes the head (system prompt + summary) and cut tool results anew.
    step = [messages[0].model_copy(), *messages[1:], UserMessage(content="next")]
    assert encode(step) == whole(step)
    assert encoder.encoded == [10, 1]


def test_a_window_that_changed_before_its_end_is_encoded_whole() -> None:
    encoder = Encoder()
    encode = SentMessages(encoder)
    messages = window(10)
    encode(messages)
    compacted = [UserMessage(content="summary"), *messages[6:], UserMessage(content="next")]
    assert encode(compacted) == whole(compacted)
    assert encoder.encoded == [10, 6]


def test_a_run_keeps_one_request_however_many_steps_it_takes() -> None:
    encode = SentMessages(Encoder())
    messages = window(50)
    for step in range(100):
        messages.append(UserMessage(content=f"step {step}"))
        encode(messages)
    assert len(encode._kept) == 1  # each request replaced the one it grew from


def test_every_run_of_a_busy_worker_finds_its_last_request() -> None:
    """64 runs at once (CLAWGATE_WORKER_CONCURRENCY's default), their steps interleaved."""
    encoder = Encoder()
    encode = SentMessages(encoder)
    runs = [window(20) for _ in range(64)]
    for _ in range(3):
        for messages in runs:
            messages.append(UserMessage(content="more"))
            assert encode(messages) == whole(messages)
    assert encoder.encoded == [21] * 64 + [1] * 128


def test_only_the_latest_requests_are_kept() -> None:
    encoder = Encoder()
    encode = SentMessages(encoder)
    runs = [window(2) for _ in range(sent.MAX_KEPT + 1)]
    for messages in runs:
        encode(messages)
    encode([*runs[0], UserMessage(content="x")])  # the oldest was dropped: encoded whole
    encode([*runs[-1], UserMessage(content="y")])  # the latest was kept
    assert encoder.encoded[-2:] == [3, 1]
    assert encode([]) == b"[]"
