"""`clawgate selftest`: a live acceptance run of the configured model and platform, the way
a first real conversation would go, in a throwaway work dir and an in-process store.

1. The platform's credentials are checked live (Slack's `auth.test`, Feishu's tenant token),
   as `clawgate doctor` does.
2. A harmless read: a file holding a random code is asked about; the model must call `read`
   (a model that never calls a tool, `tool_calls=0`, is the usual failure) and answer the code.
3. A risky write: the model is asked to write a file; the policy makes that ask, the request
   is decided as the operator (as `clawgate approvals approve` decides it), and the file must
   then hold what was asked.

Each step is one line, ✓ or ✗ with its fix; exit 0 only when all pass. The demo model is
asked in its own grammar."""

from __future__ import annotations

import asyncio
import getpass
import secrets
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from bot.doctor import Check, live_checks
from bot.settings import Settings
from bot.wiring import build_runtime
from runtime.agent import Runtime
from runtime.channel import Event, ToolStarted
from runtime.models import Actor, ConversationRef, StopReason
from runtime.policy.approvers import OPERATOR_PLATFORM
from runtime.policy.model import PolicyDocument, ToolRules
from runtime.redact import one_line
from runtime.store.connection import connect

SESSION = "selftest"
CUT = 120  # characters of an answer shown in a failed step
CONVERSATION = ConversationRef(platform="console", id="console:selftest")
NO_TOOL_FIX = (
    "use a model that calls tools (function calling); on vLLM start it with "
    "--enable-auto-tool-choice and a --tool-call-parser, on Ollama pick a model with tools"
)


class Seen:
    """The channel of the run: the tool calls it saw."""

    def __init__(self) -> None:
        self.tools: list[str] = []

    async def send(self, _: ConversationRef, event: Event) -> dict[str, str] | None:
        if isinstance(event, ToolStarted):
            self.tools.append(event.tool)
        return None


def run_selftest(settings: Settings, out: TextIO = sys.stdout) -> int:
    found = asyncio.run(_selftest(settings, out))
    failed = sum(not check.ok for check in found)
    out.write(f"{failed} of {len(found)} failed.\n" if failed else "selftest passed.\n")
    return 1 if failed else 0


async def _selftest(settings: Settings, out: TextIO) -> list[Check]:
    found: list[Check] = []

    def said(check: Check) -> bool:
        found.append(check)
        out.write(check.line() + "\n")
        out.flush()
        return check.ok

    for platform in ("slack", "feishu"):
        for check in await live_checks(settings, platform):
            said(check)
    if not all(check.ok for check in found):
        return found  # the run would be answered nowhere
    with tempfile.TemporaryDirectory(prefix="clawgate-selftest-") as work:
        await _run(settings.model_copy(update={"workdir": Path(work)}), Path(work), said)
    return found


async def _run(settings: Settings, work: Path, said: Callable[[Check], bool]) -> None:
    redis = connect(None)  # the embedded store: nothing of this run is kept
    seen = Seen()
    # Every write asks, whatever the mode: the run must stop for a decision.
    policy = PolicyDocument(tools=ToolRules(ask=["write"]))
    actor = Actor(platform="console", user_id=getpass.getuser())
    runtime = build_runtime(settings, policy, redis, seen, [actor.key])
    try:
        if said(await _read(runtime, work, seen, actor, settings.uses_demo_model)):
            said(await _write(runtime, work, actor, settings.uses_demo_model))
    finally:
        await runtime.loop.aclose()  # the models' connections
        await redis.aclose()


async def _read(runtime: Runtime, work: Path, seen: Seen, actor: Actor, demo: bool) -> Check:
    code = f"cg-{secrets.token_hex(4)}"
    (work / "selftest.txt").write_text(f"The code is {code}.\n")
    asked = (
        "read selftest.txt"
        if demo
        else ("Use the read tool to read the file selftest.txt, then reply with the code it holds.")
    )
    result = await runtime.run(SESSION, asked, actor, CONVERSATION)
    answer = result.final_text or ""
    if result.stop_reason is StopReason.ERROR:
        fix = "see `clawgate doctor` (the model's check)"
        return Check("model", False, result.error or "the run failed", fix)
    if "read" not in seen.tools:
        detail = (
            f"the model answered without calling a tool (tool_calls=0): {one_line(answer, CUT)}"
        )
        return Check("tool call", False, detail, NO_TOOL_FIX)
    if code not in answer:
        return Check("tool call", False, f"read, but answered {one_line(answer, CUT)}", NO_TOOL_FIX)
    return Check("tool call", True, "the model read a file with its tool and told its content")


async def _write(runtime: Runtime, work: Path, actor: Actor, demo: bool) -> Check:
    asked = (
        "write result.txt: DONE"
        if demo
        else ("Use the write tool to write exactly the text DONE into the file result.txt.")
    )
    run = await runtime.run(SESSION, asked, actor, CONVERSATION)
    if run.approval_id is None:
        shown = one_line(run.final_text or "", CUT)
        detail = f"no approval was asked ({run.stop_reason.value}): {shown}"
        return Check("approval", False, detail, NO_TOOL_FIX)
    operator = Actor(platform=OPERATOR_PLATFORM, user_id=getpass.getuser())
    decision = await runtime.decide(run.approval_id, True, operator, None)
    if not decision.accepted:
        return Check("approval", False, decision.message, "see `clawgate doctor`")
    written = (work / "result.txt").read_text() if (work / "result.txt").exists() else ""
    if written.strip() != "DONE":
        detail = f"approved, but result.txt holds {one_line(written, CUT)!r}"
        return Check("approval", False, detail, "a model that follows tool instructions")
    return Check("approval", True, "a write asked, was approved as the operator and ran once")
