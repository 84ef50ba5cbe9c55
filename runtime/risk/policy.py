"""The risk policy: classifies a tool call as allow, ask (a human must approve) or deny.

ALLOW is only given to what is known to be harmless; a few catastrophic calls are denied and
everything else asks. Holds the verdicts, the `[risk]` config, `RiskPolicy` with its findings
collector, and the file-tool rules (protected paths, misleading names, large deletions).
Bash commands are judged by `runtime.risk.bash`.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime.models import PolicySource
from runtime.redact import redact_text
from runtime.risk.bash import judge_bash
from runtime.risk.exports import file_risk
from runtime.risk.secrets import home_directory, resolved, secret_location
from runtime.risk.signature import command_signature

__all__ = [
    "RiskConfig",
    "RiskDecision",
    "RiskPolicy",
    "Verdict",
    "check_patterns",
    "command_signature",
]


class Verdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class RiskDecision:
    verdict: Verdict
    reasons: tuple[str, ...]  # why it is ASK or DENY; empty for ALLOW
    # Which rule decided (the first reason's), and whether it is clawgate's own or one the
    # policy file's `[risk]` added (traces and the audit trail say so); not part of what the
    # decision is (two decisions with the same verdict and reasons are the same).
    rule: str = field(default="", compare=False)
    source: PolicySource = field(default="builtin", compare=False)


# -- rule names (what traces say decided a call) -------------------------------------------------

# The rules judging each tool, unless a finding names its own.
RULES = {
    "bash": "shell",
    "write": "files",
    "edit": "files",
    "explore": "explore",
    "send_file": "send_file",
}
DENY_PATTERNS, ASK_PATTERNS, PROTECTED_PATHS = "deny_patterns", "ask_patterns", "protected_paths"
CONFIGURED = frozenset({DENY_PATTERNS, ASK_PATTERNS, PROTECTED_PATHS})  # the policy file's
CONFIGURED_PATH = "listed in protected_paths"
DEFAULT_SAFE_TOOLS = ("read",)


class RiskConfig(BaseModel):
    """The `[risk]` table of clawgate.toml: extensions of the built-in rules."""

    model_config = ConfigDict(extra="forbid")

    safe_programs: list[str] = Field(default_factory=list)
    ask_patterns: list[str] = Field(default_factory=list)
    deny_patterns: list[str] = Field(default_factory=list)
    protected_paths: list[str] = Field(default_factory=list)
    safe_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_SAFE_TOOLS))
    large_deletion_lines: int = Field(20, ge=1)
    # Paths (relative to the work directory) no call may change, whoever approves: the policy
    # file when it lies in the work directory. Set by the runtime, not by the policy file.
    locked_paths: list[str] = Field(default_factory=list)

    @field_validator("ask_patterns", "deny_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        return check_patterns(patterns)


def check_patterns(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except (re.error, OverflowError, RecursionError) as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
    return patterns


# -- tables -------------------------------------------------------------------------------------

MAX_REASON = 300  # characters of a reason; longer ones are cut in the middle

ENVIRONMENT = "environment file that may hold secrets"
LOCKFILE = "dependency lockfile"
CI = "CI configuration"
PROJECT = "project configuration"
KEY = "key material"
# What a write or edit asks about only as a change to the project (no program runs from it
# here, no secret is in it): in the `edits` mode (runtime/policy/modes.py) it runs unasked.
PROJECT_FILES = frozenset({LOCKFILE, CI, PROJECT})
PROTECTED: tuple[tuple[str, str], ...] = (
    (".env", ENVIRONMENT),
    (".env.*", ENVIRONMENT),
    ("*.env", ENVIRONMENT),
    ("package-lock.json", LOCKFILE),
    ("yarn.lock", LOCKFILE),
    ("pnpm-lock.yaml", LOCKFILE),
    ("poetry.lock", LOCKFILE),
    ("Pipfile.lock", LOCKFILE),
    ("Cargo.lock", LOCKFILE),
    ("go.sum", LOCKFILE),
    ("uv.lock", LOCKFILE),
    ("Gemfile.lock", LOCKFILE),
    ("composer.lock", LOCKFILE),
    (".github/workflows/*", CI),
    (".github/actions/*", CI),
    (".gitlab-ci.yml", CI),
    (".circleci/*", CI),
    ("Jenkinsfile", CI),
    (".travis.yml", CI),
    ("azure-pipelines.yml", CI),
    ("pyproject.toml", PROJECT),
    (".gitattributes", "git attributes, which pick programs git runs"),
    (".gitmodules", "git submodules, which can run programs"),
    ("*.pem", KEY),
    ("*.key", KEY),
    ("id_rsa*", KEY),
    ("id_dsa*", KEY),
    ("id_ecdsa*", KEY),
    ("id_ed25519*", KEY),
    (".ssh/*", "SSH configuration"),
    # The work directory is the agent's $HOME, and git runs programs named in its config
    # (core.fsmonitor, diff.external, hooks): a config write would let `git status` run code.
    (".git", "git internals, whose config and hooks can run programs"),
    (".git/*", "git internals, whose config and hooks can run programs"),
    (".gitconfig", "git configuration, which can run programs"),
    (".config/git/*", "git configuration, which can run programs"),
    (".bashrc", "shell startup file"),
    (".bash_profile", "shell startup file"),
    (".bash_login", "shell startup file"),
    (".profile", "shell startup file"),
    (".zshrc", "shell startup file"),
    (".zshenv", "shell startup file"),
    (".zprofile", "shell startup file"),
    (".zlogin", "shell startup file"),
    (".cshrc", "shell startup file"),
    (".tcshrc", "shell startup file"),
    (".config/fish/*", "shell startup file"),
)
# "secret" anywhere in a name; "key"/"keys" as a word of it (api_key, keys/, apikey) but not
# inside other words (keyboard.py, monkey.py).
SECRET_NAME = re.compile(r"secret|(?:^|[^a-z]|api)keys?(?:[^a-z]|$)")


LOCKED = "the policy file (admins change it outside clawgate)"
# Files that make a directory a git repository whose config git obeys (`git -C x status`
# runs x/config's core.fsmonitor): written only with a human's approval.
GIT_METADATA = frozenset({"config", "head", "packed-refs", "index", "commondir", "gitdir"})


def _normalized(path: str) -> str:
    return posixpath.normpath(path.replace("\\", "/")).lower()


def _may_name(command: str, name: str) -> bool:
    """Whether a word of `command` is `name` or a glob matching it (quotes and escapes
    removed, case ignored): a best effort, the policy file belongs outside the work dir."""
    plain = re.sub(r"[\"'\\]", "", command.lower())
    for word in re.split(r"[\s;&|<>()`=]+", plain):
        base = posixpath.basename(word)
        if base == name or (re.search(r"[*?\[]", base) and fnmatch.fnmatchcase(name, base)):
            return True
    return False


def _tails(path: str) -> list[str]:
    """`a/b/c` -> `a/b/c`, `b/c`, `c` (normalized), so rules apply at any depth."""
    parts = [part for part in _normalized(path).split("/") if part not in ("", ".")]
    return ["/".join(parts[start:]) for start in range(len(parts))]


# -- the policy ---------------------------------------------------------------------------------


class RiskPolicy:
    def __init__(self, config: RiskConfig | None = None) -> None:
        self.config = config or RiskConfig()
        self.safe_programs = frozenset(self.config.safe_programs)
        self.safe_tools = frozenset(self.config.safe_tools)
        self.ask_patterns = [re.compile(p) for p in self.config.ask_patterns]
        self.deny_patterns = [re.compile(p) for p in self.config.deny_patterns]
        self.protected = PROTECTED + tuple(
            (glob, CONFIGURED_PATH) for glob in self.config.protected_paths
        )
        self.locked = [_normalized(p) for p in self.config.locked_paths]

    def assess(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        workdir: Path | None = None,
        accept_edits: bool = False,
    ) -> RiskDecision:
        """`workdir`: where the call runs, to expand globs and follow symlinks in it (a call
        judged without one asks for whatever needs the disk to be understood).
        `accept_edits` (the `edits` mode): a write or edit of a project file (`PROJECT_FILES`)
        and a large deletion do not ask."""
        findings = _Findings(RULES.get(tool, "not_known"))
        if tool == "bash":
            self._assess_bash(arguments, findings, workdir)
        elif tool in ("write", "edit"):
            self._assess_file(tool, arguments, findings, workdir, accept_edits)
        elif tool == "explore":
            pass  # its child only reads: each of the child's calls is judged there
        elif tool == "send_file":
            self._assess_export(arguments, findings, workdir)
        elif tool not in self.safe_tools:
            findings.ask(f"{tool} is not known to the risk policy")
        if tool == "read":
            secret = _file_secret(arguments.get("path"), workdir)
            if secret:
                return RiskDecision(Verdict.ASK, (_shorten(redact_text(secret)),), "secret_file")
        decision = findings.decision()
        if tool in self.safe_tools and decision.verdict is not Verdict.DENY:
            # A safe tool never asks, but the denials (built in and configured) still apply.
            configured = tool not in DEFAULT_SAFE_TOOLS
            return RiskDecision(Verdict.ALLOW, (), "safe_tools", _source(configured))
        return decision

    def _assess_bash(
        self, arguments: Mapping[str, Any], findings: _Findings, workdir: Path | None
    ) -> None:
        command = arguments.get("command")
        if not isinstance(command, str):
            findings.ask("the bash command is missing")
            return
        if arguments.get("request_approval") is True:
            findings.ask("the model asked to run it with write access")
        for pattern in self.deny_patterns:
            if pattern.search(command):
                findings.deny(f"matches the deny pattern {pattern.pattern!r}", DENY_PATTERNS)
        for pattern in self.ask_patterns:
            if pattern.search(command):
                findings.ask(f"matches the ask pattern {pattern.pattern!r}", ASK_PATTERNS)
        judge_bash(command, self.safe_programs, findings, workdir)
        if findings.questions or findings.denials:  # it may change files: not this one
            for path in self.locked:
                if _may_name(command, posixpath.basename(path)):
                    findings.deny(f"it may change {path}, {LOCKED}", "locked_path")

    def _assess_file(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        findings: _Findings,
        workdir: Path | None,
        accept_edits: bool = False,
    ) -> None:
        path = arguments.get("path")
        if not isinstance(path, str) or not path.strip():
            findings.ask(f"{tool} has no path")
            return
        target = _link_target(path, workdir)
        for name in [path] if target is None else [path, target]:
            shown = path if name == path else f"{path} (a link to {name})"
            if any(tail in self.locked for tail in _tails(name)):
                findings.deny(f"{shown} is {LOCKED}", "locked_path")
            whys = self._protection(name)
            if accept_edits:
                whys = [why for why in whys if why not in PROJECT_FILES]
            if whys:
                rule = PROTECTED_PATHS if CONFIGURED_PATH in whys else "protected_path"
                findings.ask(f"{shown} is a protected path ({'; '.join(whys)})", rule)
            if posixpath.basename(_normalized(name)) in GIT_METADATA:
                findings.ask(f"{shown} could make a directory a git repository that runs programs")
            if "hooks" in _normalized(name).split("/"):
                findings.ask(f"{shown} could be a git hook, which runs as a program")
        if target is not None:  # the write lands elsewhere than the name says
            findings.ask(f"{path} is a link: the {tool} would change {target}")
        if _is_misleading_name(path):
            findings.ask(f"{path!r} is a file name shell commands could misread")
        if tool == "edit" and not accept_edits:
            self._assess_deletion(arguments, findings)

    def _assess_export(
        self, arguments: Mapping[str, Any], findings: _Findings, workdir: Path | None
    ) -> None:
        """send_file posts the file to everyone in the conversation, unredacted: a secret
        never (whoever approves), content that may be one asks (runtime/risk/exports.py)."""
        path = arguments.get("path")
        if not isinstance(path, str) or not path.strip():
            findings.ask("send_file has no path")
            return
        secret = _file_secret(path, workdir)
        if secret:
            findings.deny(f"posts a secret to the conversation: it {secret}")
        elif workdir is None:
            findings.ask("send_file judged without its work directory")
        else:
            why = file_risk(path, workdir)
            if why:
                findings.ask(f"{path} is posted to everyone in the conversation: {why}")

    def _protection(self, path: str) -> list[str]:
        """Why `path` is protected (empty if it is not). Globs are matched against the
        path and each of its tails, case-insensitively, so they apply at any depth."""
        tails = _tails(path)
        parts = tails[0].split("/") if tails else []
        reasons = [
            why
            for glob, why in self.protected
            if any(fnmatch.fnmatchcase(tail, glob.lower()) for tail in tails)
        ]
        if any(SECRET_NAME.search(part) for part in parts):
            reasons.append("its name suggests secrets or keys")
        return list(dict.fromkeys(reasons))

    def _assess_deletion(self, arguments: Mapping[str, Any], findings: _Findings) -> None:
        old, new = arguments.get("old_text"), arguments.get("new_text", "")
        if not isinstance(old, str) or not isinstance(new, str):
            return
        # The file is not read here, so replace_all counts as one occurrence.
        deleted = len(old.splitlines()) - len(new.splitlines())
        if deleted >= self.config.large_deletion_lines:
            findings.ask(f"deletes {deleted} lines", "large_deletion")


# -- findings -----------------------------------------------------------------------------------


class _Findings:
    """Reasons collected while judging one call, deduplicated, in the order found, and the
    rule of the first denial and of the first question (`rule`: the judging rules' name,
    for findings that name none)."""

    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.denials: dict[str, None] = {}
        self.questions: dict[str, None] = {}
        self.seen: set[tuple[bool, str]] = set()  # reasons as found, before masking
        self.first: dict[bool, str] = {}  # denial? -> the rule of the first such finding

    # Reasons quote the arguments: masked like them, since every human-facing text shows them.
    def ask(self, reason: str, rule: str | None = None) -> None:
        if (False, reason) not in self.seen:
            self.seen.add((False, reason))
            self.questions.setdefault(_shorten(redact_text(reason)), None)
            self.first.setdefault(False, rule or self.rule)

    def deny(self, reason: str, rule: str | None = None) -> None:
        if (True, reason) not in self.seen:
            self.seen.add((True, reason))
            self.denials.setdefault(_shorten(redact_text(reason)), None)
            self.first.setdefault(True, rule or self.rule)

    def decision(self) -> RiskDecision:
        # Denials first: they are what decides the verdict.
        reasons = tuple(dict.fromkeys([*self.denials, *self.questions]))
        if self.denials:
            rule = self.first[True]
            return RiskDecision(Verdict.DENY, reasons, rule, _source(rule in CONFIGURED))
        if self.questions:
            rule = self.first[False]
            return RiskDecision(Verdict.ASK, reasons, rule, _source(rule in CONFIGURED))
        return RiskDecision(Verdict.ALLOW, (), self.rule)


def _source(configured: bool) -> PolicySource:
    return "policy_file" if configured else "builtin"


def _shorten(reason: str, limit: int = MAX_REASON) -> str:
    """Reasons quote the command, which can be huge: keep both ends of a long one."""
    if len(reason) <= limit:
        return reason
    return reason[: limit - 60] + " ... " + reason[-55:]


# -- file rules ---------------------------------------------------------------------------------


def _link_target(path: str, workdir: Path | None) -> str | None:
    """Where a file tool's `path` really leads (see `resolved`); None if it is what it says."""
    return None if workdir is None else resolved(path, str(workdir), workdir)


def _file_secret(path: object, workdir: Path | None) -> str | None:
    """Why reading `path` with the read tool may expose secrets (through links too)."""
    if not isinstance(path, str):
        return None
    target = _link_target(path, workdir)
    home = home_directory()
    for name in [path] if target is None else [path, target]:
        why = secret_location(name, home)
        if why:
            shown = path if name == path else f"{path} (a link to {name})"
            return f"reads {shown} ({why})"
    return None


def _is_misleading_name(path: str) -> bool:
    """A name a later command could take for an option (`-delete` matched by `find *`) or
    for code (`$(cmd)` fed to `${f@P}` or arithmetic)."""
    parts = path.replace("\\", "/").split("/")
    return any(part.startswith("-") or set(part) & set("$`\n") for part in parts)
