"""One run's decision tree, as `clawgate trace show` and the console's run page show it: the
trace, and beneath each `approval.pause` span the trace(s) of the run(s) that resumed it after
the decision, so a paused-and-resumed run reads as one tree. Each node is a span's headline
(`name [tool|provider] [#index] status duration  key=value ...`) and, in replay mode, its
payload lines; how it is drawn (box characters, nested lists) is the reader's business."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runtime.redact import one_line
from runtime.tracing.document import AttributeValue, SpanDoc, TraceDoc
from runtime.tracing.store import TraceStore, UnreadableTrace

MAX_DEPTH = 50  # resumed-by links followed at most this deep
PAYLOAD_LINE = 160  # payload text shown per line in the tree (the JSON has all of it)
HASH_CHARS = 12
# Shown in the span's headline instead of as key=value.
HEADLINE = {"tool.call": ("tool",), "llm.call": ("provider",)}
# Shown first of the key=values, by shorter names: how a call was judged, and why it failed.
LEADING = {
    "policy_verdict": "verdict",
    "policy_source": "source",
    "policy_rule": "rule",
    "error_code": "error",
}


@dataclass
class Linked:
    """A trace and, in order, the traces that resumed it."""

    doc: TraceDoc
    resumed_by: list[Linked] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.doc.model_dump(mode="json"),
            "resumed_by": [r.to_json() for r in self.resumed_by],
        }

    def trace_ids(self) -> list[str]:
        """This trace's id and those of every trace that resumed it, in tree order."""
        return [self.doc.trace_id, *(i for r in self.resumed_by for i in r.trace_ids())]


async def collect(store: TraceStore, trace_id: str) -> Linked | None:
    """The trace and everything that resumed it, transitively (each trace once). Raises
    `UnreadableTrace` when the trace itself cannot be read; resuming traces that cannot be
    read are left out."""
    seen: set[str] = set()

    async def load(tid: str, depth: int) -> Linked | None:
        if tid in seen or depth > MAX_DEPTH:
            return None
        seen.add(tid)
        try:
            doc = await store.load(tid)
        except UnreadableTrace:
            if depth == 0:
                raise
            return None
        if doc is None:
            return None
        linked = Linked(doc)
        for child_id in await store.resumed_by(tid):
            child = await load(child_id, depth + 1)
            if child is not None:
                linked.resumed_by.append(child)
        return linked

    return await load(trace_id, 0)


@dataclass
class Node:
    """One span: its headline, then detail lines (payloads). `approval` is the approval an
    `approval.pause` span waits for; `resumed` the trace id when this span is the root of a
    trace that resumed a pause."""

    lines: list[str]
    children: list[Node] = field(default_factory=list)
    approval: str = ""
    resumed: str = ""


def tree(linked: Linked) -> Node:
    """Nodes for the trace's spans, with each resuming trace under the pause it resumed."""
    pending = list(linked.resumed_by)

    def node(span: SpanDoc) -> Node:
        n = Node(span_lines(span), [node(c) for c in span.children])
        if span.name == "approval.pause":
            approval = span.attributes.get("approval_id")
            n.approval = approval if isinstance(approval, str) else ""
            for resumed in [r for r in pending if _resumes(r.doc, approval)]:
                pending.remove(resumed)
                n.children.append(_resumed_node(resumed))
        return n

    root = node(linked.doc.root)
    root.children.extend(_resumed_node(r) for r in pending)  # no matching pause recorded
    return root


def trace_headline(doc: TraceDoc) -> str:
    started = datetime.fromtimestamp(doc.started_at / 1000).astimezone()
    parts = [
        f"trace {doc.trace_id}",
        f"session {doc.session}",
        started.isoformat(timespec="seconds"),
        f"{doc.mode} mode",
    ]
    if doc.dropped_spans:
        parts.append(f"{doc.dropped_spans} spans not recorded (cap)")
    return "  ".join(parts)


def _resumes(doc: TraceDoc, approval_id: AttributeValue | None) -> bool:
    return any(link.approval_id == approval_id for link in doc.links)


def _resumed_node(linked: Linked) -> Node:
    inner = tree(linked)
    inner.resumed = linked.doc.trace_id
    return inner


def span_lines(span: SpanDoc) -> list[str]:
    """`name [tool|provider] [#index] status duration  key=value ...` (a call's verdict,
    its source and error code first), then the tools a step offered, then payload lines."""
    attributes = dict(span.attributes)
    offered = _offered(attributes.pop("offered_tools", None), attributes.pop("offered_count", None))
    if attributes.get("stop_reason") == span.status:
        del attributes["stop_reason"]
    words = [span.name]
    words.extend(_value(attributes.pop(k)) for k in HEADLINE.get(span.name, ()) if k in attributes)
    if span.name == "tool.call" and "index" in attributes:
        words.append(f"#{attributes.pop('index')}")
    words.append(span.status)
    if span.duration_ms is not None:
        words.append(_duration(span.duration_ms))
    headline = " ".join(words)
    pairs = [(LEADING[k], attributes.pop(k)) for k in LEADING if k in attributes]
    pairs.extend(attributes.items())
    if pairs:
        headline += "  " + " ".join(f"{k}={_attribute(k, v)}" for k, v in pairs)
    return [
        headline,
        *offered,
        *(f"{name}: {one_line(text, PAYLOAD_LINE)}" for name, text in span.payloads.items()),
    ]


def _offered(names: AttributeValue | None, count: AttributeValue | None) -> list[str]:
    """`offered (N): a, b, …` for a step that recorded the tools it offered."""
    if not isinstance(names, list):
        return []
    total = count if isinstance(count, int) else len(names)
    more = f", … ({total - len(names)} more)" if total > len(names) else ""
    return [f"offered ({total}): {', '.join(names) or '-'}{more}"]


def _attribute(key: str, value: AttributeValue) -> str:
    if key.endswith("_sha256") and isinstance(value, str):
        return value[:HASH_CHARS]
    return _value(value)


def _value(value: AttributeValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value) or "-"
    text = str(value)
    return json.dumps(text, ensure_ascii=False) if not text or " " in text else text


def _duration(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"
