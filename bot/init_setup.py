"""`clawgate init`: the settings of a first deployment asked for (or taken from flags with
`--non-interactive`), each checked live where it can be (as `clawgate doctor` checks them),
then written where every clawgate command finds them and the agent cannot write: the user's
settings file, `~/.config/clawgate/env` (mode 0600, bot/settings_file.py), and the policy
file beside it (`clawgate.toml`, named in it); the work dir is the current directory unless
named. An audit key is made. It ends with `clawgate doctor`; files there already are kept
unless `--force`."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import re
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from bot.doctor import Check, live_checks, run_doctor
from bot.settings import Settings
from bot.settings_file import user_settings_file

POLICY_FILE = "clawgate.toml"
PERSON = re.compile(r"^(slack:U[A-Z0-9]+|feishu:ou_[A-Za-z0-9_-]+)$")
POLICIES = {
    "default": (
        "# What admins decide (docs/policy.md); the built-in risk rules apply as they are.\n"
        "[approvals]\n"
        "requester_may_approve = false  # someone else approves what a person asked for\n"
    ),
    "strict": (
        "# What admins decide (docs/policy.md): every change asks a human first.\n"
        "[tools]\n"
        'ask = ["write", "edit", "bash"]\n\n'
        "[approvals]\n"
        "requester_may_approve = false\n"
    ),
}


class InitError(Exception):
    """A missing or refused answer, non-interactively: one line, exit 2."""


@dataclass
class Answers:
    """The settings being made, by variable name (only those set)."""

    env: dict[str, str] = field(default_factory=dict)
    policy: str = "default"

    def settings(self) -> Settings:
        """What these answers give, for the live checks (nothing else of the machine's)."""
        try:
            return Settings.model_validate(self.env)
        except ValidationError as exc:
            raise InitError("; ".join(e["msg"] for e in exc.errors())) from None


Ask = Callable[[str, str, bool], str]


def run_init(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    env = user_settings_file(os.environ)
    written = [env, env.parent / POLICY_FILE]
    there = [str(path) for path in written if path.exists()]
    if there and not args.force:
        out.write(f"clawgate: {', '.join(there)} exist already; --force replaces them\n")
        return 2
    ask = _flags(args) if args.non_interactive else _prompt(out)
    try:
        answers = _answers(args, ask, out, not args.non_interactive)
        workdir = Path(answers.env["CLAWGATE_WORKDIR"])
        if env.resolve().is_relative_to(workdir):  # the agent could rewrite it there
            raise InitError(f"--workdir: {workdir} holds {env}: choose one that does not")
    except InitError as exc:
        out.write(f"clawgate: {exc}\n")
        return 2
    if answers.policy != "none":
        answers.env["CLAWGATE_POLICY_FILE"] = str(written[1])
    _write(env, answers)
    out.write(f"wrote {env} (mode 0600)")
    out.write(f" and {written[1]}" if answers.policy != "none" else "")
    out.write(f"; the work dir is {workdir}\nclawgate doctor:\n")
    out.flush()
    return run_doctor(out)


def _answers(args: argparse.Namespace, ask: Ask, out: TextIO, again: bool) -> Answers:
    answers = Answers()
    env = answers.env
    platform = ask("platform", "Chat platform: slack, feishu or none (the terminal only)", False)
    if platform not in ("slack", "feishu", "none"):
        raise InitError(f"--platform: slack, feishu or none, not {platform!r}")
    if platform == "slack":
        env["SLACK_BOT_TOKEN"] = ask("slack_bot_token", "Slack bot token (xoxb-…)", True)
        app = ask("slack_app_token", "Slack app token for Socket Mode (xapp-…), or empty", True)
        if app:
            env["SLACK_APP_TOKEN"] = app
        else:
            env["SLACK_SIGNING_SECRET"] = ask("slack_signing_secret", "Slack signing secret", True)
        if args.slack_api_url:
            env["SLACK_API_URL"] = args.slack_api_url
        _checked(answers, "slack", out, again, ask)
    elif platform == "feishu":
        env["FEISHU_APP_ID"] = ask("feishu_app_id", "Feishu app id (cli_…)", False)
        env["FEISHU_APP_SECRET"] = ask("feishu_app_secret", "Feishu app secret", True)
        env["FEISHU_MODE"] = "websocket"  # the long connection: no public URL needed
        if args.feishu_domain:
            env["FEISHU_DOMAIN"] = args.feishu_domain
        _checked(answers, "feishu", out, again, ask)
    base = ask("model_base_url", "Model server URL (empty: OpenAI; 'demo': offline demo)", False)
    if base != "demo":
        if base:
            env["OPENAI_BASE_URL"] = base
        env["OPENAI_API_KEY"] = ask("model_api_key", "Model API key", True)
        env["CLAWGATE_MODEL"] = ask("model", "Model name", False) or "gpt-4.1-mini"
        _checked(answers, "model", out, again, ask)
    redis = ask("redis_url", "Redis URL (redis://…; empty: the embedded store, chat only)", False)
    if redis:
        env["REDIS_URL"] = redis
        _checked(answers, "redis", out, again, ask)
    admins = ask("admins", "Admins (slack:U… or feishu:ou_…, comma-separated)", False)
    wrong = [a for a in filter(None, map(str.strip, admins.split(","))) if not PERSON.match(a)]
    if wrong or not admins.strip():
        raise InitError(f"--admins: people as slack:U… or feishu:ou_…, not {wrong or 'none'}")
    env["CLAWGATE_ADMINS"] = ",".join(a.strip() for a in admins.split(",") if a.strip())
    workdir = Path(ask("workdir", "Work dir (empty: this directory)", False) or ".")
    env["CLAWGATE_WORKDIR"] = str(workdir.expanduser().resolve())
    answers.policy = ask("policy", "Starting policy: default, strict or none", False) or "default"
    if answers.policy not in (*POLICIES, "none"):
        raise InitError(f"--policy: default, strict or none, not {answers.policy!r}")
    env["CLAWGATE_AUDIT_KEY"] = f"k1:{secrets.token_urlsafe(24)}"
    return answers


def _checked(answers: Answers, what: str, out: TextIO, again: bool, ask: Ask) -> None:
    """The live check of the answers so far about `what`; failed, said and (interactively)
    the question asked again by starting over that part."""
    found: list[Check] = asyncio.run(live_checks(answers.settings(), what))
    for check in found:
        out.write(check.line() + "\n")
    if all(check.ok for check in found):
        return
    if not again:
        raise InitError(f"{what}: {next(c.detail for c in found if not c.ok)}")
    if ask("retry", "Keep it anyway? (y/n)", False).lower().startswith("y"):
        return
    raise InitError(f"{what}: not kept; run clawgate init again")


def _write(env: Path, answers: Answers) -> None:
    Path(answers.env["CLAWGATE_WORKDIR"]).mkdir(parents=True, exist_ok=True)
    env.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(env, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write("# Written by clawgate init (docs/configuration.md names every setting).\n")
        file.writelines(f"{name}={value}\n" for name, value in answers.env.items())
    policy = env.parent / POLICY_FILE
    if answers.policy == "none":
        policy.unlink(missing_ok=True)
    else:
        policy.write_text(POLICIES[answers.policy])


def _flags(args: argparse.Namespace) -> Ask:
    def ask(name: str, question: str, _secret: bool) -> str:
        value = getattr(args, name, None)
        if value is None:
            if name in OPTIONAL:
                return ""
            raise InitError(f"--{name.replace('_', '-')}: needed ({question})")
        return str(value)

    return ask


# Flags that may be left out non-interactively (their empty answer has a meaning).
OPTIONAL = {"slack_app_token", "model_base_url", "redis_url", "workdir", "policy", "model"}


def _prompt(out: TextIO) -> Ask:
    def ask(name: str, question: str, secret: bool) -> str:
        out.write(f"{question}: ")
        out.flush()
        answer = getpass.getpass("") if secret else input()
        return answer.strip()

    return ask
