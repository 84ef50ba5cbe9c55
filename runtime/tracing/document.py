"""The stored trace: one JSON document per run (a boundary, hence pydantic).

A run is a tree of spans: `agent.run` (or, for a run continued after a decision,
`approval.resume`) → `agent.step` → `llm.call` | `tool.call` → `approval.pause`. Times are
milliseconds; `start_ms` is the offset from the trace's start. `attributes` hold only metadata
(ids, hashes, key names, sizes, counts, statuses); `payloads` (replay mode only) hold redacted,
truncated text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

AttributeValue = str | int | float | bool | list[str]
SCHEMA_VERSION = 1


class SpanDoc(BaseModel):
    id: str
    name: str
    status: str
    start_ms: float
    duration_ms: float | None = None
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    payloads: dict[str, str] = Field(default_factory=dict)
    children: list[SpanDoc] = Field(default_factory=list)

    def walk(self) -> list[SpanDoc]:
        """This span and all below it, depth first in tree order."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


class TraceLink(BaseModel):
    """This trace continues the run recorded in `trace_id`, after a decision on `approval_id`.
    `origin`: the first trace of that run (itself, unless it was a resumption too), so that a
    run paused and resumed many times is known as one (one OpenTelemetry trace); None in
    traces written before it was kept."""

    trace_id: str
    approval_id: str | None = None
    relation: Literal["resumes"] = "resumes"
    origin: str | None = None


class TraceDoc(BaseModel):
    version: int = SCHEMA_VERSION
    trace_id: str
    mode: Literal["metadata", "replay"]
    session: str
    started_at: int  # ms since the epoch
    duration_ms: float
    links: list[TraceLink] = Field(default_factory=list)
    dropped_spans: int = 0  # spans over the per-trace cap, not recorded
    root: SpanDoc

    def spans(self) -> list[SpanDoc]:
        return self.root.walk()

    @property
    def origin(self) -> str:
        """The trace of the run's first part: this one, unless it continues a paused run."""
        if not self.links:
            return self.trace_id
        return self.links[0].origin or self.links[0].trace_id


SpanDoc.model_rebuild()
