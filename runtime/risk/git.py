"""The bash judge's rules for git: which subcommands and options only read, where a
repository's own config could run programs, and when committed secrets could be printed."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from pathlib import Path

from runtime.risk.git_contents import prints_no_secret
from runtime.risk.secrets import tracked_secrets
from runtime.risk.tables import (
    GIT_BRANCH_LISTING,
    GIT_CONTENT,
    GIT_DIFF_SUMMARY,
    GIT_ELSEWHERE,
    GIT_GLOBAL_FLAGS,
    GIT_GLOBAL_VALUED,
    GIT_LISTINGS,
    GIT_LOG_METADATA,
    GIT_LOG_METADATA_VALUED,
    GIT_READ_ONLY,
)
from runtime.risk.words import is_force_push, long_option_is, short_option_has


class GitRules:
    """Mixed into the bash judge (runtime.risk.bash), whose findings and state it uses."""

    cwd: str | None
    workdir: Path | None

    def ask(self, reason: str) -> None:
        raise NotImplementedError

    def release_words(self, name: str, args: Sequence[str]) -> bool:
        raise NotImplementedError

    # -- git ---------------------------------------------------------------------------------

    def _git(self, args: Sequence[str]) -> None:
        index = self._git_global_options(args)
        if index >= len(args):
            return  # `git`, `git --version`: usage and version
        subcommand, rest = args[index], args[index + 1 :]
        self._git_foreign_repository(args[:index])
        if any(long_option_is(arg, "--pathspec-from-file") for arg in rest):
            self.ask(
                f"git {subcommand} --pathspec-from-file takes file names from data, "
                "which the judge cannot see"
            )
        if subcommand in GIT_CONTENT:
            self._git_tracked_secrets(subcommand, rest, moved="-C" in args[:index])
        if subcommand in GIT_READ_ONLY:
            return
        if subcommand in GIT_LISTINGS:
            self._git_listing(subcommand, rest)
        elif subcommand in ("diff", "log", "show", "grep"):
            self._git_output_options(subcommand, rest)
        elif subcommand == "branch":
            if any(arg not in GIT_BRANCH_LISTING for arg in rest):
                self.ask(f"git branch {' '.join(rest)} changes branches")
        else:
            self._git_changes(subcommand, rest)

    def _git_foreign_repository(self, options: Sequence[str]) -> None:
        """A repository nested in the work directory (`git -C pkg/mod`, or after `cd`) has a
        config of its own, which can make git run programs (core.fsmonitor): ask."""
        if self.cwd is None or self.workdir is None:
            return
        place = self.cwd
        for index, option in enumerate(options[:-1]):
            if option == "-C":
                place = posixpath.normpath(posixpath.join(place, options[index + 1]))
        root = str(self.workdir)
        if place != root and not place.startswith(root + "/"):
            self.ask(f"git uses a repository outside the work directory ({place})")
            return
        while place.startswith(root + "/"):
            if os.path.lexists(posixpath.join(place, ".git")) or all(
                os.path.lexists(posixpath.join(place, name)) for name in ("HEAD", "config")
            ):
                shown = posixpath.relpath(place, root)
                self.ask(f"git uses the repository in {shown}, whose config can run programs")
                return
            place = posixpath.dirname(place)

    def _git_output_options(self, subcommand: str, rest: Sequence[str]) -> None:
        """`--output=f` writes a file; `git grep -O<cmd>` (in any cluster) runs a program."""
        for arg in rest:
            if subcommand != "grep" and long_option_is(arg, "--output"):
                self.ask(f"git {subcommand} {arg} writes to a file")
            elif subcommand == "grep" and (
                long_option_is(arg, "--open-files-in-pager") or short_option_has(arg, "O", "efABCm")
            ):
                self.ask(f"git grep {arg} opens the files in a program")

    def _git_tracked_secrets(self, subcommand: str, rest: Sequence[str], moved: bool) -> None:
        """git prints committed contents, which no sandbox mask hides: when the repository
        tracks a secret (a committed `.env`), every subcommand that may print file contents
        asks, but for `git log` with options known to print commit metadata alone and the
        shapes `runtime.risk.git_contents` knows cannot reach a secret (`--full-diff`, `..`
        and git's own globs reach past a pathspec: those ask). `moved`: `git -C dir`."""
        if self.workdir is None or not tracked_secrets(self.workdir):
            return
        secrets = tracked_secrets(self.workdir)
        if not moved and self.cwd is not None:
            prefix = posixpath.relpath(self.cwd, self.workdir)
            if prints_no_secret(subcommand, rest, secrets, prefix):
                return
        if subcommand in ("log", "whatchanged") and all(_log_metadata_only(a) for a in rest):
            return
        options = [arg for arg in rest if arg.startswith("-")]
        summary = set(options) <= GIT_DIFF_SUMMARY and bool(set(options) - {"--"})
        if subcommand == "diff" and summary:
            return  # names and statistics only
        if subcommand == "stash" and rest[:1] != ["show"]:
            return  # stash list
        batch = any(arg.startswith("--batch") for arg in rest)
        if subcommand == "cat-file" and {"-t", "-s", "-e"} & set(rest) and not batch:
            return  # an object's type or size
        secret = secrets[0]
        if secret.startswith("("):  # the index could not be read: fail closed
            self.ask(f"git {subcommand} may print a secret the repository tracks {secret}")
        else:
            self.ask(f"git {subcommand} may print {secret}, a secret the repository tracks")

    def _git_listing(self, subcommand: str, rest: Sequence[str]) -> None:
        if not all(arg in GIT_LISTINGS[subcommand] for arg in rest):
            self.ask(f"git {subcommand} {' '.join(rest)} may change the repository")

    def _git_global_options(self, args: Sequence[str]) -> int:
        """Index of the subcommand after git's own options; `-c` can make git run programs."""
        index = 0
        while index < len(args) and args[index].startswith("-"):
            arg = args[index]
            if arg.startswith(("-c", "--config-env", "--exec-path")):
                self.ask(f"git {arg} changes configuration, which can run programs")
            elif arg.startswith(GIT_ELSEWHERE):
                self.ask(f"git {arg} uses another repository, whose config can run programs")
            elif arg in ("--version", "--help", "-h", "-v"):
                return len(args)
            elif arg not in GIT_GLOBAL_FLAGS and arg.partition("=")[0] not in GIT_GLOBAL_VALUED:
                self.ask(f"git option {arg} is not understood")
            index += 2 if arg in GIT_GLOBAL_VALUED or arg in ("-c", "--config-env") else 1
        return index

    def _git_changes(self, subcommand: str, rest: Sequence[str]) -> None:
        if subcommand == "reset" and "--hard" in rest:
            self.ask("git reset --hard discards uncommitted changes")
        elif subcommand == "clean":
            self.ask("git clean deletes untracked files")
        elif subcommand == "push" and is_force_push(rest):
            self.ask("git push --force rewrites remote history")
        elif not self.release_words("git", [subcommand, *rest]):
            self.ask(f"git {subcommand} is not a known read-only git subcommand")


def _log_metadata_only(arg: str) -> bool:
    """A `git log` word that keeps it to commit metadata: a revision or path, or an option
    that selects, orders or formats commits (anything else may add a patch: -p, --binary,
    --patch-with-raw, --full-diff ...)."""
    if not arg.startswith("-") or arg == "--":
        return True
    if arg[1:].isdigit():
        return True  # -5
    return arg in GIT_LOG_METADATA or arg.partition("=")[0] in GIT_LOG_METADATA_VALUED
