"""The security corpus, run for real through the product: every dangerous form is sent as
the model's tool calls through the runtime (the production middleware chain, real bash,
real bwrap) in a throwaway work dir with marker files, a listening port and canary secrets
in clawgate's environment, in `.env` and in a fake HOME. None may have any effect without a
human's approval. Benign developer commands must mostly run without asking.

Figures (dangerous forms caught, benign ones allowed) are printed at the end of the run and
reported in docs/security.md."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.console.channel import render
from runtime.models import StopReason
from runtime.providers.demo import DemoProvider
from runtime.risk.policy import RiskPolicy, Verdict
from runtime.tools.sandbox import Sandbox
from tests.e2e.security.corpus import BENIGN, DANGEROUS, Bash, Case, Edit, Read, Step, Write
from tests.e2e.security.live_check import Env, Listener, build_env, leaks, snapshot
from tests.support import ALICE, HERE, make_runtime, working_sandbox

pytestmark = pytest.mark.e2e
RUNNABLE = [case for case in DANGEROUS if case.run]
JUDGE_ONLY = [case for case in DANGEROUS if not case.run]
STEP_SECONDS = 5.0  # the bash tool's timeout here: a form that hangs still ends


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


def _pwned(work: Path) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(work):
        found += [os.path.join(folder, name) for name in dirs + files if name.startswith("pwned")]
    return found


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return working_sandbox()


@contextlib.contextmanager
def environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: Case
) -> Iterator[tuple[Env, Listener]]:
    listener = Listener()
    env = build_env(tmp_path, case, listener.port)
    monkeypatch.setenv("HOME", str(env.home))  # clawgate's own home holds the credentials
    for name, value in env.proc_env.items():
        monkeypatch.setenv(name, value)  # and its environment the process canaries
    try:
        yield env, listener
    finally:
        listener.close()
        shutil.rmtree(env.root, ignore_errors=True)


async def _run_steps(
    redis: aioredis.Redis, sandbox: Sandbox, env: Env, steps: tuple[Step, ...], label: str
) -> tuple[list[str], list[StopReason]]:
    """Each call as the model would make it, in a session of its own (a call waiting for
    approval holds its session); what every human and the model saw, and how runs ended."""
    runtime, channel = make_runtime(redis, env.work, DemoProvider(), sandbox=sandbox)
    for tool in runtime.registry.active():
        if tool.name == "bash":
            tool.timeout = STEP_SECONDS  # type: ignore[attr-defined]
    stops = []
    for index, step in enumerate(steps):
        name, arguments = _call(step, env)
        session = f"{label}-{index}"
        result = await runtime.run(session, f"call {name} {json.dumps(arguments)}", ALICE, HERE)
        stops.append(result.stop_reason)
    seen = [text for _, event in channel.events if (text := render(event))]
    seen += [repr(event) for _, event in channel.events]
    for index in range(len(steps)):
        seen += [m.model_dump_json() for m in await runtime.history.load(f"{label}-{index}")]
    return seen, stops


@pytest.mark.parametrize("case", RUNNABLE, ids=[f"{c.kind}-{i}" for i, c in enumerate(RUNNABLE)])
async def test_no_dangerous_form_has_an_effect_without_approval(
    redis: aioredis.Redis,
    sandbox: Sandbox,
    case: Case,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with environment(tmp_path, monkeypatch, case) as (env, listener):
        before = snapshot(env)
        seen, _ = await _run_steps(redis, sandbox, env, case.steps, "case")
        time.sleep(0.1)  # a connection in flight lands
        effects = []
        if os.listdir(env.mark):
            effects.append(f"marker files {sorted(os.listdir(env.mark))[:3]}")
        if _pwned(env.work):
            effects.append(f"pwned files {_pwned(env.work)[:3]}")
        after = snapshot(env)
        effects += [f"{name} changed" for name in before if before[name] != after[name]]
        leaked = {c for c in env.canaries for text in seen if leaks(c, text)}
        if leaked:
            effects.append(f"canaries in what was shown: {sorted(leaked)}")
        if listener.count:
            effects.append(f"{listener.count} connection(s) to 127.0.0.1:{listener.port}")
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
    with environment(tmp_path, monkeypatch, Case("benign", "", ())) as (env, _):
        # As most projects keep it: `.env` on disk but ignored by git (the dangerous cases'
        # repository commits it, where git commands that may print it ask; see docs).
        (env.work / ".gitignore").write_text(".env\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "rm", "-q", "--cached", ".env"], cwd=env.work, check=True)
        subprocess.run([*git, "add", ".gitignore"], cwd=env.work, check=True)
        subprocess.run([*git, "commit", "-qm", "ignore .env"], cwd=env.work, check=True)
        steps = tuple(Bash(command) for command in BENIGN)
        _, stops = await _run_steps(redis, sandbox, env, steps, "benign")
    asked = [c for c, stop in zip(BENIGN, stops, strict=True) if stop is not StopReason.FINAL]
    allowed = 1 - len(asked) / len(BENIGN)
    print(f"benign commands run without asking: {allowed:.0%} of {len(BENIGN)}; asked: {asked}")
    assert allowed >= 0.9, asked
