"""`clawgate trace show <trace-id> [--json]`: one run's decision tree, from Redis.

The tree is drawn with box characters: each span's name, status, duration and attributes (a
tool call's policy verdict, its source and rule and its error code first; a step's offered
tools on a line of their own) and, for traces recorded in replay mode, its redacted payloads.
Links are followed: a run that paused for approval shows the trace(s) of the run(s) that
resumed it beneath its `approval.pause` span, so one command draws the whole
paused-and-resumed run. `--json` prints the documents,
nested the same way: `{"trace": {...}, "resumed_by": [{"trace": {...}, "resumed_by": [...]}]}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TextIO

from bot.settings import Settings, SettingsError
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys
from runtime.tracing.store import TraceStore, UnreadableTrace
from runtime.tracing.tree import Linked, Node, collect, trace_headline, tree


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


def render(linked: Linked) -> list[str]:
    doc = linked.doc
    out = [trace_headline(doc)]
    out.extend(f"resumes trace {link.trace_id}" for link in doc.links)
    _draw(tree(linked), "", True, out, root=True)
    return out


def _draw(node: Node, prefix: str, last: bool, out: list[str], root: bool = False) -> None:
    headline = f"[trace {node.resumed}] {node.lines[0]}" if node.resumed else node.lines[0]
    out.append(prefix + ("" if root else "└─ " if last else "├─ ") + headline)
    below = prefix + ("" if root else "   " if last else "│  ")
    for detail in node.lines[1:]:
        out.append(below + ("│  " if node.children else "   ") + detail)
    for i, child in enumerate(node.children):
        _draw(child, below, i == len(node.children) - 1, out)
