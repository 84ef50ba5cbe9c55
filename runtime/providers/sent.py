"""The messages' JSON of a run's last model request, kept for its next one.

Each step of a run sends its whole window again (hundreds of messages in a long thread) with
a message or two more at the end, the same message objects from step to step. What a request
sent is kept, found again by its last message, and only the messages after it are encoded,
with one `json.dumps` of the tail (a call per message would cost more than the whole window
at once). Before that last message a message may be an equal copy: the system prompt with
its summary and old tool results cut short are made again at each step. A run's request
replaces the one it grew from; the latest MAX_KEPT requests are kept, at most MAX_BYTES of
JSON: more than the runs a worker has under way, few enough that the objects they hold cost
the garbage collector little. Not for a model that takes images: an image is read again for
every request (it may have changed)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime.models import Message

MAX_KEPT = 256
MAX_BYTES = 64 * 1024 * 1024
LOOK_BACK = 8  # messages a step may add and still find what the run sent before


@dataclass(frozen=True)
class _Sent:
    messages: tuple[Message, ...]
    items: bytes  # their JSON, comma-separated, without the array's brackets


class SentMessages:
    def __init__(self, encode: Callable[[Sequence[Message]], bytes]) -> None:
        """`encode`: messages -> their JSON array, compact (items joined by a bare comma)."""
        self._encode = encode
        self._kept: OrderedDict[int, _Sent] = OrderedDict()  # by their last message's id
        self._bytes = 0

    def __call__(self, messages: Sequence[Message]) -> bytes:
        """The messages as a JSON array."""
        if not messages:
            return b"[]"
        before = self._before(messages)
        done = len(before.messages) if before else 0
        tail = self._encode(messages[done:])[1:-1] if done < len(messages) else b""
        items = b",".join(filter(None, (before.items if before else b"", tail)))
        if before is not None:
            self._drop(id(before.messages[-1]))
        # Kept by its last message, which the entry holds: that id is not reused meanwhile.
        self._drop(id(messages[-1]))
        self._kept[id(messages[-1])] = _Sent(tuple(messages), items)
        self._bytes += len(items)
        while len(self._kept) > MAX_KEPT or self._bytes > MAX_BYTES:
            self._drop(next(iter(self._kept)))
        return b"[" + items + b"]"

    def _drop(self, key: int) -> None:
        if (sent := self._kept.pop(key, None)) is not None:
            self._bytes -= len(sent.items)

    def _before(self, messages: Sequence[Message]) -> _Sent | None:
        """What this run sent last: a request whose messages begin these ones."""
        for end in range(len(messages), max(0, len(messages) - LOOK_BACK), -1):
            sent = self._kept.get(id(messages[end - 1]))
            if (
                sent is not None
                and len(sent.messages) == end
                and all(a is b or a == b for a, b in zip(sent.messages, messages, strict=False))
            ):
                return sent
        return None
