"""People's display names for the thread context, looked up through a platform's API and kept
in the process, bounded (the least recently used dropped first): a name for `ttl` seconds, a
look-up that failed (the id then stands for the name) for `retry` seconds before it is asked
again."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

LookUp = Callable[[str], Awaitable[str | None]]  # a person's name, None when it cannot be had


class NameCache:
    def __init__(
        self, look_up: LookUp, size: int, ttl: float = math.inf, retry: float = 0.0
    ) -> None:
        self.look_up = look_up
        self.size = size
        self.ttl = ttl
        self.retry = retry
        self._cache: OrderedDict[str, tuple[float, str]] = OrderedDict()

    async def name(self, person: str) -> str:
        now = time.monotonic()
        cached = self._cache.get(person)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(person)
            return cached[1]
        found = await self.look_up(person)
        self._cache[person] = (now + (self.ttl if found else self.retry), found or person)
        self._cache.move_to_end(person)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return found or person
