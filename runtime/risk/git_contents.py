"""When a git command that prints committed contents cannot print a tracked secret.

A repository that commits its `.env` makes `git log -p`, `git show` and `git diff` print it,
which no sandbox mask hides. Some such commands still cannot reach it: a patch limited to
literal paths that hold no secret (`git log -p -1 -- src/app.py`), a commit's statistics
(`git show --stat HEAD`), the blame of a file that is not one. Only these shapes pass, with
options from short lists (anything else — `--follow`, `--full-diff`, `-L`, copy detection,
`--textconv`, `--contents`, globs, `..`, pathspec magic, a revision that could name a blob —
keeps asking): revisions are `HEAD`-relative (a hex id or a ref could name any object).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from runtime.risk.secrets import secret_location

# HEAD, @, HEAD~2, HEAD^, and ranges of them (HEAD~3..HEAD).
REVISION = re.compile(r"(?:HEAD|@)(?:[~^]\d*)*(?:\.\.\.?(?:HEAD|@)(?:[~^]\d*)*)?")
# Options that print names and statistics only, for `git show` (instead of the patch).
NO_PATCH = frozenset(
    {"--stat", "--shortstat", "--numstat", "--name-only", "--name-status", "--no-patch", "-s"}
)
# Options that change how a patch or the commits around it look, not which files it shows.
LAYOUT = frozenset(
    {"-p", "--patch", "-u", "--no-color", "-w", "-b", "--ignore-all-space",
     "--ignore-space-change", "--ignore-blank-lines", "--minimal", "--patience", "--histogram",
     "--word-diff", "--color-words", "--no-renames", "-R", "--cached", "--staged", "--oneline",
     "--abbrev-commit", "--no-merges", "--first-parent", "--reverse", "--graph", "--decorate",
     "--date-order", "--topo-order"}
)  # fmt: skip
LAYOUT_VALUED = frozenset(
    {"-U", "--unified", "--format", "--pretty", "--date", "--abbrev", "-n", "--max-count",
     "--since", "--until", "--after", "--before", "--author", "--committer", "--grep", "--color",
     "--stat", "--word-diff", "--skip"}
)  # fmt: skip
BLAME_OPTIONS = frozenset({"-w", "-s", "-l", "-t", "-n", "-f", "-e", "--show-name",
                           "--show-number", "--show-email", "--porcelain", "--line-porcelain",
                           "--root", "--no-color"})  # fmt: skip
LINE_RANGE = re.compile(r"\d+(?:,[+-]?\d+)?|,[+-]?\d+")


def prints_no_secret(
    subcommand: str, args: Sequence[str], secrets: Sequence[str], prefix: str
) -> bool:
    """Whether `git <subcommand> <args>`, run in `prefix` (the directory relative to the
    repository's root), cannot print any of the tracked `secrets` (paths from the root)."""
    if any(secret.startswith("(") for secret in secrets):
        return False  # the index could not be read: anything may be tracked
    paths = _Paths(secrets, prefix)
    if subcommand == "blame":
        return _blame(args, paths)
    options, revisions, specs = _split(args)
    if options is None or not all(_layout(option) for option in options):
        return False
    if subcommand in ("log", "diff"):
        return (
            all(REVISION.fullmatch(r) for r in revisions)
            and bool(specs)
            and all(paths.safe(spec) for spec in specs)
        )
    if subcommand == "show":
        no_patch = bool(set(options) & NO_PATCH) and not {"-p", "--patch"} & set(options)
        return all(paths.safe(spec) for spec in specs) and all(
            _shown(revision, no_patch, paths) for revision in revisions or ["HEAD"]
        )
    return False


class _Paths:
    def __init__(self, secrets: Sequence[str], prefix: str) -> None:
        self.secrets = [secret.lower() for secret in secrets]
        self.prefix = "" if prefix in ("", ".") else prefix

    def safe(self, spec: str, root: bool = False) -> bool:
        """A literal path (from the root with `root`, else from the prefix) that is not a
        secret and holds none: no glob, no magic (`:(glob)`, `:/`), no `..`, not the root."""
        if not spec or spec.startswith((":", "/")) or any(ch in spec for ch in "*?[]\\"):
            return False
        parts = [part for part in spec.split("/") if part not in ("", ".")]
        if not parts or ".." in parts:
            return False
        path = posixpath.join("" if root else self.prefix, *parts).lower()
        if secret_location(path):
            return False
        return not any(s == path or s.startswith(path + "/") for s in self.secrets)


def _split(args: Sequence[str]) -> tuple[list[str] | None, list[str], list[str]]:
    """Options, revisions and pathspecs (the words after `--`); None for the options when a
    word before `--` is neither an option nor a revision (a ref, a hex id, a path)."""
    options: list[str] = []
    revisions: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            return options, revisions, list(args[index + 1 :])
        if arg.startswith("-"):
            options.append(arg)
        elif REVISION.fullmatch(arg) or ":" in arg:
            revisions.append(arg)
        else:
            return None, [], []
    return options, revisions, []


def _layout(option: str) -> bool:
    if option in LAYOUT or option in NO_PATCH or re.fullmatch(r"-\d+", option):
        return True
    name = option.partition("=")[0]
    return (option.startswith("--") and "=" in option and name in LAYOUT_VALUED) or (
        not option.startswith("--") and option[:2] in LAYOUT_VALUED and option[2:].isdigit()
    )


def _shown(revision: str, no_patch: bool, paths: _Paths) -> bool:
    """`git show` of a commit prints its patch unless told not to; of `HEAD:path`, that
    file (or that directory's listing) as committed."""
    commit, colon, path = revision.partition(":")
    if not REVISION.fullmatch(commit) or ".." in commit or path.startswith("./"):
        return False  # `HEAD:./x` is relative to the current directory: not judged here
    return paths.safe(path, root=True) if colon else no_patch


def _blame(args: Sequence[str], paths: _Paths) -> bool:
    """`git blame [REV] [--] file`: only that file's lines, with options that print no other
    (not `--contents`, `-C`, `-S`, `--ignore-revs-file`, ...)."""
    words: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            words += args[index + 1 :]
            break
        if arg == "-L" and index + 1 < len(args) and LINE_RANGE.fullmatch(args[index + 1]):
            index += 2
            continue
        if arg.startswith("-L") and LINE_RANGE.fullmatch(arg[2:]):
            pass
        elif arg.startswith("-"):
            if arg not in BLAME_OPTIONS:
                return False
        else:
            words.append(arg)
        index += 1
    if len(words) == 2 and REVISION.fullmatch(words[0]) and ".." not in words[0]:
        words = words[1:]
    return len(words) == 1 and paths.safe(words[0])
