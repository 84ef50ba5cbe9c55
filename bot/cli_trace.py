"""`clawgate trace show <trace-id> [--json]`: one run's decision tree, from Redis.

The tree is drawn with box characters: each span's name, status, duration and attributes (and,
for traces recorded in replay mode, its redacted payloads). Links are followed: a run that paused
for approval shows the trace(s) of the run(s) that resumed it beneath its `approval.pause`
span, so one command draws the whole paused-and-resumed run. `--json` prints the documents,
nested the same way: `{"trace": {...}, "resumed_by": [{"trace": {...}, "resumed_by": [...]}]}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from bot.settings import Settings, SettingsError
from runtime.redact import one_line
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys
from runtime.tracing.document import AttributeValue, SpanDoc, TraceDoc
from runtime.tracing.store import TraceStore, UnreadableTrace

MAX_DEPTH = 50  # resumed-by links followed at most this deep
PAYLOAD_LINE = 160  # payload text shown per line in the tree (the JSON has all of it)
HASH_CHARS = 12
# Shown in the span's headline instead of as key=value.
HEADLINE = {"tool.call": ("tool",), "llm.call": ("provider",)}


def run_trace_command(settings: Settings, args: argparse.Namespace) -> int:
    """`clawgate trace …`: 0; 1 for an unknown or unreadable id or when Redis fails; 2 for
    a usage error."""
    trace_id = args.id.strip()
    if not trace_id:
        print("clawgate: trace show: the trace id is empty", file=sys.stderr)
        return 2
    if not settings.redis_url:
        raise SettingsError("REDIS_URL: required for `clawgate trace` (traces live there)")
    try:
        return asyncio.run(_show(settings, trace_id, args.json, sys.stdout, sys.stderr))
    except REDIS_FAILURES as exc:
        print(f"clawgate: cannot read traces: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


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


async def _show(settings: Settings, trace_id: str, as_json: bool, out: TextIO, err: TextIO) -> int:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    try:
        linked = await collect(TraceStore(redis, Keys(settings.redis_prefix)), trace_id)
    except UnreadableTrace:
        err.write(
            f"clawgate: trace {trace_id!r} is stored but unreadable (damaged, or written by "
            "an incompatible version)\n"
        )
        return 1
    finally:
        await redis.aclose()
    if linked is None:
        err.write(
            f"clawgate: unknown trace id {trace_id!r} (never recorded, or older than "
            "CLAWGATE_TRACE_TTL)\n"
        )
        return 1
    if as_json:
        out.write(json.dumps(linked.to_json(), indent=2, ensure_ascii=False) + "\n")
    else:
        out.write("\n".join(render(linked)) + "\n")
    out.flush()
    return 0


# --- drawing ---------------------------------------------------------------------------------


@dataclass
class Node:
    lines: list[str]  # the headline, then detail lines (payloads)
    children: list[Node] = field(default_factory=list)


def render(linked: Linked) -> list[str]:
    doc = linked.doc
    out = [_trace_headline(doc)]
    out.extend(f"resumes trace {link.trace_id}" for link in doc.links)
    _draw(_tree(linked), "", True, out, root=True)
    return out


def _trace_headline(doc: TraceDoc) -> str:
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


def _tree(linked: Linked) -> Node:
    """Nodes for the trace's spans, with each resuming trace under the pause it resumed."""
    pending = list(linked.resumed_by)

    def node(span: SpanDoc) -> Node:
        n = Node(_span_lines(span), [node(c) for c in span.children])
        if span.name == "approval.pause":
            approval = span.attributes.get("approval_id")
            for resumed in [r for r in pending if _resumes(r.doc, approval)]:
                pending.remove(resumed)
                n.children.append(_resumed_node(resumed))
        return n

    root = node(linked.doc.root)
    root.children.extend(_resumed_node(r) for r in pending)  # no matching pause recorded
    return root


def _resumes(doc: TraceDoc, approval_id: AttributeValue | None) -> bool:
    return any(link.approval_id == approval_id for link in doc.links)


def _resumed_node(linked: Linked) -> Node:
    inner = _tree(linked)
    inner.lines[0] = f"[trace {linked.doc.trace_id}] {inner.lines[0]}"
    return inner


def _draw(node: Node, prefix: str, last: bool, out: list[str], root: bool = False) -> None:
    out.append(prefix + ("" if root else "└─ " if last else "├─ ") + node.lines[0])
    below = prefix + ("" if root else "   " if last else "│  ")
    for detail in node.lines[1:]:
        out.append(below + ("│  " if node.children else "   ") + detail)
    for i, child in enumerate(node.children):
        _draw(child, below, i == len(node.children) - 1, out)


def _span_lines(span: SpanDoc) -> list[str]:
    """`name [tool|provider] [#index] status duration  key=value ...`, then payload lines."""
    attributes = dict(span.attributes)
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
    if attributes:
        headline += "  " + " ".join(f"{k}={_attribute(k, v)}" for k, v in attributes.items())
    return [
        headline,
        *(f"{name}: {one_line(text, PAYLOAD_LINE)}" for name, text in span.payloads.items()),
    ]


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
