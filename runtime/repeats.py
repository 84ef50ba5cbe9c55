"""Stops a run that goes round in circles: the same call (tool and canonical arguments)
getting the same outcome (status and whole result text) several times in a row.

A success counts as well as a failure: an identical call that returns an identical result
with nothing in between taught the model nothing, whether it failed or not, and a run that
does it again and again only spends steps until `max_steps`. Tools whose use *is* asking
again (a status check while waiting: `Tool.polling`, or named in CLAWGATE_POLLING_TOOLS,
for MCP tools) never count, and any other call in between (one of them included) starts
the count over. A repeat of a call inside one batch is not run (the executor answers it
from the first), so it neither counts nor breaks a streak.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from runtime.canonical import UNKNOWN_TOOL, canonical_arguments
from runtime.evidence_keys import encode
from runtime.models import ToolCall, ToolResult, ToolStatus
from runtime.receipts import result_text
from runtime.tools.registry import ToolRegistry

DEFAULT_LIMIT = 3


@dataclass(frozen=True, slots=True)
class RepeatRule:
    """`limit`: identical outcomes in a row that stop a run (0: never); `polling`: tool names
    never counted, besides the tools marked `polling`."""

    limit: int = DEFAULT_LIMIT
    polling: frozenset[str] = frozenset()

    def ignores(self, registry: ToolRegistry, name: str) -> bool:
        tool = registry.resolve(name)
        return name in self.polling or (tool is not None and tool.polling)


@dataclass(slots=True)
class Streak:
    """The latest run of identical outcomes: which (a hash, never the arguments), of which
    tool, how many, and whether they failed."""

    key: str = ""
    tool: str = ""
    count: int = 0
    failed: bool = False

    def observe(
        self,
        rule: RepeatRule,
        registry: ToolRegistry,
        calls: Sequence[ToolCall],
        results: Sequence[ToolResult],
        skip: Collection[int] = (),
    ) -> bool:
        """Count a batch's outcomes (`results[i]` answers `calls[i]`; indexes in `skip` were
        not run); True once a streak reaches the limit."""
        if rule.limit <= 0:
            return False
        for i, (call, result) in enumerate(zip(calls, results, strict=False)):
            if i in skip:
                continue
            if rule.ignores(registry, call.name):
                self.key, self.count = "", 0
                continue
            outcome = (call.name, canonical_arguments(call), result.status, result_text(result))
            key = hashlib.sha256(encode(*outcome)).hexdigest()
            if key == self.key:
                self.count += 1
            else:
                # A name the model made up may be any text: not repeated to the chat.
                tool = call.name if registry.known(call.name) else UNKNOWN_TOOL
                self.key, self.tool, self.count = key, tool, 1
                self.failed = result.status is not ToolStatus.COMPLETED or result.unfinished
            if self.count >= rule.limit:
                return True
        return False

    def message(self) -> str:
        """What the chat is told: the tool and the count, never the arguments."""
        got = "the same error" if self.failed else "the same result"
        return (
            f"Stopped: the model called {self.tool} {self.count} times in a row with the same "
            f"arguments and got {got} each time (CLAWGATE_REPEAT_LIMIT). Say how to go on, "
            "or ask differently."
        )
