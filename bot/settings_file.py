"""Which settings file clawgate may read: one the agent cannot write.

An approved command may write anywhere in the work dir, so a settings file there (`./.env`
with CLAWGATE_WORKDIR the current directory, the default layout) could turn the sandbox off
or add an admin at the next start, and every command could read clawgate's own keys in it.
The file (`CLAWGATE_ENV_FILE`, else `.env` in the current directory, else the user's own,
`~/.config/clawgate/env`, which `clawgate init` writes) is therefore read only
when neither its path nor what it resolves to lies inside the work dir, and it is no hard
link (another name of it may be inside); otherwise it is ignored, with one warning naming the
fix. Where it is comes from the process environment alone; the work dir the file may name
must not contain it either."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dotenv import dotenv_values

ENV_FILE = ".env"
ENV_FILE_VARIABLE = "CLAWGATE_ENV_FILE"
WORKDIR_VARIABLE = "CLAWGATE_WORKDIR"
FIX = (
    "move it out of the work dir and name it with CLAWGATE_ENV_FILE (e.g. "
    "CLAWGATE_ENV_FILE=/etc/clawgate/env), set the variables in the environment, or point "
    "CLAWGATE_WORKDIR elsewhere"
)


@dataclass(frozen=True, slots=True)
class SettingsFile:
    """The settings file read (None: none), the variables it sets (upper-case names), why
    a file that exists was not read, or the file CLAWGATE_ENV_FILE names that does not."""

    path: Path | None = None
    values: frozenset[str] = field(default_factory=frozenset)
    ignored: str | None = None
    missing: str | None = None


def find_settings_file(
    environ: Mapping[str, str], cwd: Path, settings: Collection[str]
) -> SettingsFile:
    """`settings`: the variables clawgate reads. A project's own `.env` in the work dir that
    sets none of them is not clawgate's: ignored without a word."""
    upper = {name.upper(): value for name, value in environ.items()}
    named = upper.get(ENV_FILE_VARIABLE)
    if named:
        path = Path(named).expanduser()
    elif (cwd / ENV_FILE).exists():
        path = Path(ENV_FILE)
    else:  # the user's own, where `clawgate init` writes it
        path = user_settings_file(environ)
    location = Path(os.path.abspath(cwd / path))  # the name as given: its links unresolved
    if not location.is_file():
        return SettingsFile(missing=str(location) if named else None)
    values = {name.upper(): value for name, value in dotenv_values(location).items()}
    # The work dir without the file, and the one it would give: outside both, or a file the
    # agent once wrote could name another work dir to leave it behind.
    workdirs = {cwd / upper.get(WORKDIR_VARIABLE, ".")}
    if WORKDIR_VARIABLE not in upper and values.get(WORKDIR_VARIABLE):
        workdirs.add(cwd / str(values[WORKDIR_VARIABLE]))
    for workdir in workdirs:
        why = agent_may_write(location, workdir)
        if why and values.keys() & set(settings):
            return SettingsFile(ignored=f"ignoring the settings file {location}: {why}")
        if why:
            return SettingsFile()
    return SettingsFile(location, frozenset(values))


def user_settings_file(environ: Mapping[str, str]) -> Path:
    """$XDG_CONFIG_HOME/clawgate/env (by default ~/.config/clawgate/env): the settings file
    read where CLAWGATE_ENV_FILE names none and the current directory has no `.env`."""
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(base) / "clawgate" / "env"


def agent_may_write(location: Path, workdir: Path) -> str | None:
    """Why the agent could change the file at `location` (None: it cannot): approved commands
    write anywhere in the work dir. Also for the policy file (bot/server.py)."""
    location = Path(os.path.abspath(location))
    lexical, resolved = Path(os.path.abspath(workdir)), workdir.resolve()
    target = location.resolve()
    if any(p.is_relative_to(w) for p in (location, target) for w in (lexical, resolved)):
        return f"it is inside the work dir {resolved}, where approved commands may change it"
    if location.stat().st_nlink > 1:
        return "it is a hard link, so another name of it may be inside the work dir"
    return None
