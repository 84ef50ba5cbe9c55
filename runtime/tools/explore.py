"""`explore`: hand a question about the work directory to a read-only child agent that runs in
a session of its own, and get back only its concise report (see runtime/subagent.py).

To the parent loop it is a normal tool; it runs alone (never beside other calls: it costs
model calls) and never needs approval, because everything the child does is read-only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from pydantic import Field, field_validator

from runtime.redact import one_line
from runtime.tools.base import Effects, Tool, ToolArgs, ToolCancelled, ToolContext, ToolOutput
from runtime.tools.sandbox import Access

DEFAULT_STEPS = 6
MAX_STEPS = 12
MAX_TASK_CHARS = 8_000


class ExploreArgs(ToolArgs):
    task: str = Field(
        max_length=MAX_TASK_CHARS,
        description="What to find out, as a self-contained question or instruction: the "
        "explorer sees nothing of this conversation.",
    )
    max_steps: int = Field(
        DEFAULT_STEPS,
        strict=True,
        ge=1,
        le=MAX_STEPS,
        description=f"Model steps the explorer may take (default {DEFAULT_STEPS}).",
    )

    @field_validator("task")
    @classmethod
    def _not_blank(cls, task: str) -> str:
        if not task.strip():
            raise ValueError("must not be empty")
        return task.strip()


class Explorer(Protocol):
    @property
    def tools(self) -> Mapping[str, Tool[Any]]:
        """The read-only tools its child may have."""
        ...

    async def explore(self, task: str, max_steps: int, ctx: ToolContext) -> str:
        """Run the child agent; returns the report for the parent."""
        ...


class ExploreTool(Tool[ExploreArgs]):
    name = "explore"
    description = (
        "Delegate a read-only investigation of the work directory (finding where something is "
        "defined, how a feature works, what files contain) to a helper agent with its own "
        "context. It can read files and run read-only shell commands, never change anything. "
        "Returns only its findings, so long explorations do not fill this conversation."
    )
    args_model = ExploreArgs

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer

    def effects(self, ctx: ToolContext) -> Effects:
        """Its child's calls run read-only: it changes nothing when none of them can (a bash
        without an OS sandbox runs with clawgate's own rights)."""
        child = replace(ctx, access=Access.READ_ONLY)
        return Effects(self.name, all(t.effects(child).again for t in self.explorer.tools.values()))

    async def run(self, args: ExploreArgs, ctx: ToolContext) -> ToolOutput:
        report = await self.explorer.explore(args.task, args.max_steps, ctx)
        if ctx.cancelled.is_set():  # the report says how far it got; the call ends cancelled
            raise ToolCancelled(report)
        return ToolOutput(report, display=f"explored: {one_line(args.task, 60)}")

    def summarize(self, args: ExploreArgs) -> str:
        return f"explore: {one_line(args.task, 80)}"
