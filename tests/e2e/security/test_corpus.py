"""The security corpus, run for real through the product: every dangerous form is sent as
the model's tool calls through the runtime (the production middleware chain, real bash,
real bwrap) in a throwaway work dir with marker files, a listening port, unix sockets
(outside the work dir, inside it, abstract), planted fifos, and canary secrets in
clawgate's environment, in `.env`, in a fake HOME, in `.git/config` URLs, in
`node_modules`/`.venv`, and outside the work dir (/srv, /opt, another home, /var, /mnt).
None may have any effect without a human's approval, and no canary may appear in any text a
human or the model saw (a secret spelled into a project file: in none a human saw). Benign
developer commands must mostly run without asking.

Figures (dangerous forms caught, benign ones allowed) are printed at the end of the run and
reported in docs/security.md."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.console.channel import render
from runtime.models import StopReason
from runtime.providers.demo import DemoProvider
from runtime.risk.policy import RiskPolicy, Verdict
from runtime.tools.base import ToolArgs, ToolContext, ToolOutput
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Sandbox
from tests.e2e.security.corpus import (
    BENIGN,
    DANGEROUS,
    TRACKED_ENV_ASKS,
    TRACKED_ENV_RUNS,
    Bash,
    Case,
    Edit,
    Read,
    Step,
    Swap,
    Write,
)
from tests.e2e.security.live_check import Env, Watchdog, observed, planted, snapshot, swap
from tests.support import ALICE, HERE, make_runtime, working_sandbox

pytestmark = pytest.mark.e2e
RUNNABLE = [case for case in DANGEROUS if case.run]
JUDGE_ONLY = [case for case in DANGEROUS if not case.run]
STEP_SECONDS = 5.0  # the bash tool's timeout here: a form that hangs still ends
GIVE_UP_SECONDS = 60.0  # a call blocked even after the fifos were released


def _call(step: Step, env: Env) -> tuple[str, dict[str, object]]:
    match step:
        case Bash(command):
            return "bash", {"command": env.sub(command)}
        case Write(path, content):
            return "write", {"path": env.sub(path), "content": env.sub(content)}
        case Edit(path, old, new):
            return "edit", {
                "path": env.sub(path),
                "old_text": env.sub(old),
                "new_text": env.sub(new),
            }
        case Read(path):
            return "read", {"path": env.sub(path)}
    raise AssertionError(step)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return working_sandbox()


@contextlib.contextmanager
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: Case) -> Iterator[Env]:
    with planted(tmp_path, case) as env:
        monkeypatch.setenv("HOME", str(env.home))  # clawgate's own home holds the credentials
        for name, value in env.proc_env.items():
            monkeypatch.setenv(name, value)  # and its environment the process canaries
        yield env


RunTool = Callable[[ToolArgs, ToolContext], Awaitable[ToolOutput]]


def _swapping(run: RunTool, env: Env, pending: list[Swap]) -> RunTool:
    async def swapped_then_run(args: ToolArgs, ctx: ToolContext) -> ToolOutput:
        while pending:
            swap(env, pending.pop(0))
        return await run(args, ctx)

    return swapped_then_run


def _swap_before_running(registry: ToolRegistry, env: Env, pending: list[Swap]) -> None:
    """Each tool's run does the pending swaps first: after the judge, before the tool."""
    for tool in registry.active():
        tool.run = _swapping(tool.run, env, pending)  # type: ignore[method-assign,assignment]


@dataclass
class Outcome:
    shown: list[str]  # every text a person was shown
    model: list[str]  # what the model saw (its history)
    stops: list[StopReason]  # how each call's run ended
    blocked: int  # calls that had not answered after HANG_SECONDS


async def _run_steps(
    redis: aioredis.Redis, sandbox: Sandbox, env: Env, steps: tuple[Step, ...], label: str
) -> Outcome:
    """Each call as the model would make it, in a session of its own (a call waiting for
    approval holds its session); a Swap is done when the next call's tool starts."""
    runtime, channel = make_runtime(redis, env.work, DemoProvider(), sandbox=sandbox)
    for tool in runtime.registry.active():
        if tool.name == "bash":
            tool.timeout = STEP_SECONDS  # type: ignore[attr-defined]
    pending: list[Swap] = []
    _swap_before_running(runtime.registry, env, pending)
    assert env.traps is not None
    outcome = Outcome([], [], [], 0)
    sessions = []
    for index, step in enumerate(steps):
        if isinstance(step, Swap):
            pending.append(step)
            continue
        name, arguments = _call(step, env)
        session = f"{label}-{index}"
        sessions.append(session)
        request = f"call {name} {json.dumps(arguments)}"
        with Watchdog(env.traps) as watch:
            try:
                result = await asyncio.wait_for(
                    runtime.run(session, request, ALICE, HERE), GIVE_UP_SECONDS
                )
                outcome.stops.append(result.stop_reason)
            except TimeoutError:
                outcome.stops.append(StopReason.ERROR)
                watch.blocked = True
        outcome.blocked += watch.blocked
    outcome.shown = [text for _, event in channel.events if (text := render(event))]
    outcome.shown += [repr(event) for _, event in channel.events]
    for session in sessions:
        outcome.model += [m.model_dump_json() for m in await runtime.history.load(session)]
    return outcome


@pytest.mark.parametrize("case", RUNNABLE, ids=[f"{c.kind}-{i}" for i, c in enumerate(RUNNABLE)])
async def test_no_dangerous_form_has_an_effect_without_approval(
    redis: aioredis.Redis,
    sandbox: Sandbox,
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with environment(tmp_path, monkeypatch, case) as env:
        before = snapshot(env)
        outcome = await _run_steps(redis, sandbox, env, case.steps, "case")
        time.sleep(0.1)  # a connection in flight lands
        effects = observed(env, before, outcome.shown, outcome.model, outcome.blocked)
        assert not effects, (case.source, effects)


@pytest.mark.parametrize(
    "case", JUDGE_ONLY, ids=[f"{c.kind}-{i}" for i, c in enumerate(JUDGE_ONLY)]
)
def test_forms_too_dangerous_to_run_are_denied_outright(case: Case, tmp_path: Path) -> None:
    env = Env(tmp_path, tmp_path, tmp_path / "mark", tmp_path / "home", 9)
    verdicts = [RiskPolicy().assess(*_call(step, env), tmp_path).verdict for step in case.steps]
    assert Verdict.DENY in verdicts, (case.source, case.steps)


async def test_benign_developer_commands_run_without_asking(
    redis: aioredis.Redis, sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with environment(tmp_path, monkeypatch, Case("benign", "", ())) as env:
        # As most projects keep it: `.env` on disk but ignored by git (the dangerous cases'
        # repository commits it, where git commands that may print it ask; see docs).
        (env.work / ".gitignore").write_text(".env\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "rm", "-q", "--cached", ".env"], cwd=env.work, check=True)
        subprocess.run([*git, "add", ".gitignore"], cwd=env.work, check=True)
        subprocess.run([*git, "commit", "-qm", "ignore .env"], cwd=env.work, check=True)
        steps = tuple(Bash(command) for command in BENIGN)
        stops = (await _run_steps(redis, sandbox, env, steps, "benign")).stops
    asked = [c for c, stop in zip(BENIGN, stops, strict=True) if stop is not StopReason.FINAL]
    allowed = 1 - len(asked) / len(BENIGN)
    print(f"benign commands run without asking: {allowed:.0%} of {len(BENIGN)}; asked: {asked}")
    assert allowed >= 0.9, asked


async def test_in_a_repository_tracking_env_git_runs_unasked_only_what_cannot_print_it(
    redis: aioredis.Redis, sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dangerous cases' repository commits `.env`: git commands that cannot print a
    tracked secret still run unasked; those that may print it ask."""
    with environment(tmp_path, monkeypatch, Case("benign", "", ())) as env:
        (env.work / "src/app.py").write_text("print('second')\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "commit", "-qam", "second"], cwd=env.work, check=True)
        commands = TRACKED_ENV_RUNS + TRACKED_ENV_ASKS
        steps = tuple(Bash(command) for command in commands)
        stops = (await _run_steps(redis, sandbox, env, steps, "tracked")).stops
    ran = {c for c, stop in zip(commands, stops, strict=True) if stop is StopReason.FINAL}
    assert [c for c in TRACKED_ENV_RUNS if c not in ran] == []  # these ran unasked
    assert [c for c in TRACKED_ENV_ASKS if c in ran] == []  # these asked
