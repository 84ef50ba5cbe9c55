"""What git sees of a repository in the read-only view: its config files with only keys that
name no program and no credential, and an environment that forces the rest off.

A repository's config can make read-only git commands run programs (core.fsmonitor on
`git status`, diff.external and textconv on `git diff`, filters, pagers, hooks, aliases, gpg
on `git log --show-signature`, include of another file that does any of these); it is
written by whoever wrote the work directory, an agent's earlier approved command included.
So an unapproved command sees each config file of the work directory rebuilt from a short
list of keys known to be data, URLs without their credentials."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# (section, name) kept, subsection any; "*" for any name of the section.
SAFE_KEYS = frozenset(
    {
        ("core", "repositoryformatversion"),
        ("core", "bare"),
        ("core", "filemode"),
        ("core", "logallrefupdates"),
        ("core", "ignorecase"),
        ("core", "symlinks"),
        ("core", "precomposeunicode"),
        ("core", "autocrlf"),
        ("core", "eol"),
        ("core", "quotepath"),
        ("core", "worktree"),  # where a submodule's files are
        ("core", "sparsecheckout"),
        ("core", "sparsecheckoutcone"),
        ("core", "untrackedcache"),
        ("core", "checkstat"),
        ("core", "trustctime"),
        ("extensions", "*"),
        ("remote", "url"),
        ("remote", "pushurl"),
        ("remote", "fetch"),
        ("remote", "push"),
        ("remote", "mirror"),
        ("remote", "tagopt"),
        ("remote", "promisor"),
        ("remote", "partialclonefilter"),
        ("branch", "remote"),
        ("branch", "pushremote"),
        ("branch", "merge"),
        ("branch", "rebase"),
        ("branch", "description"),
        ("submodule", "url"),
        ("submodule", "active"),
        ("submodule", "branch"),
        ("user", "name"),
        ("user", "email"),
        ("init", "defaultbranch"),
        ("index", "version"),
        ("status", "showuntrackedfiles"),
        ("diff", "renames"),
        ("diff", "algorithm"),
    }
)
URL_KEYS = frozenset({"url", "pushurl"})
# Overrides for every git of an unapproved command (GIT_CONFIG_COUNT outranks all files):
# defense in depth, should a program-running key reach it some other way (the system config).
READ_ONLY_CONFIG = (
    ("safe.bareRepository", "explicit"),  # no config of a bare repository found by chance
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),  # an empty value clears the list of helpers
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("protocol.ext.allow", "never"),  # ext:: URLs run a command, no network needed
)
READ_ONLY_ENV = {
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "false",
    "GIT_SEQUENCE_EDITOR": "false",
    "GIT_SSH_COMMAND": "false",
    "GIT_ASKPASS": "false",
}
_HTTP_USERINFO = re.compile(r"^((?:https?|ftps?)://)[^/?#]*@", re.IGNORECASE)
_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^/?#:@]*):[^/?#@]*@", re.IGNORECASE)
MAX_CONFIG_BYTES = 1024 * 1024


def without_credentials(url: str) -> str:
    """`url` without a password, and without any userinfo for HTTP (where a lone user is a
    token: `https://ghp_…@github.com/…`); `git@host:path` keeps its user."""
    url = _HTTP_USERINFO.sub(r"\1", url)
    return _PASSWORD.sub(r"\1@", url)


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def sanitized(path: Path) -> bytes:
    """The safe keys of the git config file `path`, as a config file (empty when git cannot
    read it: then git in the sandbox sees no settings, which runs nothing)."""
    git = shutil.which("git")
    try:
        if git is None or path.stat().st_size > MAX_CONFIG_BYTES:
            return b""
        # --file reads that one file; include.* is not followed without --includes.
        done = subprocess.run(
            [git, "config", "--file", str(path), "--list", "-z"],
            capture_output=True,
            timeout=10,
            cwd="/",  # no repository of clawgate's own around it
            env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return b""
    if done.returncode != 0:
        return b""
    sections: dict[tuple[str, str | None], list[str]] = {}
    for entry in done.stdout.decode("utf-8", errors="replace").split("\0"):
        key, valued, value = entry.partition("\n")
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        if not name or not {(section, name), (section, "*")} & SAFE_KEYS:
            continue
        if name in URL_KEYS:
            value = without_credentials(value)
        # A key without a value (`[core] bare`) is a true boolean; "" would be false.
        line = f"\t{name} = {_quote(value)}" if valued else f"\t{name}"
        sections.setdefault((section, subsection or None), []).append(line)
    lines: list[str] = []
    for (section, sub), entries in sections.items():
        header = section if sub is None else f"{section} {_quote(sub)}"
        lines += [f"[{header}]", *entries]
    return "\n".join([*lines, ""]).encode() if lines else b""
