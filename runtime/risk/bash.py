"""The bash rules of the risk policy, and `command_signature` (the "approve always" key).

`judge_bash` records why a command asks or is denied: wrappers are unwrapped, `sh -c` strings
recursed into, and every program checked against the tables below. ALLOW needs every simple
command to be a known read-only program used in a read-only way (see `runtime.risk.policy`).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from runtime.risk import program_scripts
from runtime.risk.secrets import (
    HARMLESS_DEVICES,
    home_directory,
    resolved,
    secret_location,
    tracked_secrets,
)
from runtime.risk.secrets import is_device as _is_device
from runtime.risk.shell import Redirect, Segment, ShellAnalysis, parse_shell
from runtime.risk.static_shell import (
    NotStatic,
    Script,
    Word,
    expand,
    parse_static,
)

# -- program tables -----------------------------------------------------------------------------

# Read-only programs without dangerous options (those with some: _BashJudge.read_only_checks).
READ_ONLY = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo", "true",
        "false", "whoami", "uname", "basename", "dirname", "realpath", "stat", "du", "df",
        "cut", "tr", "diff", "cmp", "which", "type", "sleep", "nl", "tac", "rev", "paste",
        "join", "comm", "column", "md5sum", "sha1sum", "sha256sum", "sha512sum", "seq", "id",
        "hostname", "printenv", "expr", "readlink", "locale", "nproc", "arch", "tty",
    }
)  # fmt: skip
FIXED_REASONS = {
    "rm": "rm deletes files",
    "rmdir": "rmdir deletes directories",
    "unlink": "unlink deletes files",
    "shred": "shred destroys files",
    "mv": "mv moves or overwrites files",
    "cp": "cp copies over files",
    "ln": "ln creates links",
    "mkdir": "mkdir creates directories",
    "touch": "touch creates or modifies files",
    "truncate": "truncate changes file sizes",
    "tee": "tee writes to files",
    "dd": "dd writes raw data",
    "chmod": "chmod changes file permissions",
    "chown": "chown changes file ownership",
    "chgrp": "chgrp changes file ownership",
    "kill": "kill signals processes",
    "pkill": "pkill signals processes",
    "killall": "killall signals processes",
    "curl": "curl accesses the network",
    "wget": "wget accesses the network",
}
PACKAGE_MANAGERS = frozenset(
    {
        "pip", "pip3", "uv", "pipx", "poetry", "npm", "pnpm", "yarn", "apt", "apt-get", "dnf",
        "yum", "apk", "brew", "gem", "cargo", "go",
    }
)  # fmt: skip
INSTALL_WORDS = frozenset({"install", "add", "i", "ci", "reinstall", "upgrade", "sync"})
RELEASE_WORDS = frozenset({"deploy", "publish", "release"})
# Programs whose every positional word is a target or task name (`make build deploy`).
TASK_RUNNERS = frozenset({"make", "just", "task", "rake", "invoke", "fab", "gradle", "mvn", "npx"})
SCRIPT_RUNNERS = frozenset({"run", "run-script", "exec", "x"})  # `npm run deploy`
# Checked read-only programs with options that make them write or run programs: an argument
# only known when the command runs (`$x`, `*`) may turn into such an option.
OPTION_SENSITIVE = frozenset(
    {"find", "rg", "sort", "uniq", "tree", "file", "date", "printf", "git"}
)
# Programs that take a subcommand: command_signature keeps it (`git push`, `npm publish`).
MULTI_COMMAND = frozenset(
    {
        "git", "npm", "pnpm", "yarn", "pip", "pip3", "uv", "poetry", "cargo", "go", "docker",
        "kubectl", "helm", "make", "gh", "apt", "apt-get", "brew", "systemctl",
    }
)  # fmt: skip
# Shells whose `-c` string is parsed as bash; others (fish, csh) have another syntax.
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
OTHER_SHELLS = frozenset({"fish", "csh", "tcsh", "nu", "xonsh", "elvish", "pwsh"})
INTERPRETERS = ("python", "perl", "ruby", "node", "php", "lua", "deno", "bun")
SYSTEM_BIN_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"}
)
# Directories whose recursive deletion is refused: `/` itself, and these (or all they hold).
CATASTROPHIC_DIRS = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
        "/proc", "/root", "/sbin", "/srv", "/sys", "/usr", "/var",
    }
)  # fmt: skip
HOME_WORDS = ("~", "$HOME", "${HOME}")
ECHOED = re.compile(r"\$\(\s*echo\s+([^\s()$`]+)\s*\)|`\s*echo\s+([^\s()$`]+)\s*`")
# Raw disks and memory: reading them exposes everything, writing them destroys it.
RAW_DEVICE = re.compile(
    r"/dev/(?:sd[a-z]|nvme\d|hd[a-z]|vd[a-z]|xvd[a-z]|mmcblk\d|dm-\d|mapper/|loop\d|disk/"
    r"|mem$|kmem$|port$)"
)
# Programs that write to the files they name: onto a device, that is a raw disk write.
FILE_WRITERS = frozenset({"cp", "mv", "tee", "shred", "truncate", "install", "ln", "rsync"})
# Programs that read whole directory trees: from `/` or a system directory they read it all.
RECURSIVE_READERS = frozenset({"find", "rg", "du", "tree", "grep", "egrep", "fgrep", "ls"})
# Environment variables that cannot make a program run anything else; any other one can
# (PATH, LD_PRELOAD, GIT_*, HOME for ~/.gitconfig, RIPGREP_CONFIG_PATH ...), so it asks.
HARMLESS_ENV = frozenset(
    {
        "LANG", "LANGUAGE", "TZ", "TERM", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR",
        "CLICOLOR", "CLICOLOR_FORCE", "POSIXLY_CORRECT",
    }
)  # fmt: skip
PAGER_ENV = frozenset({"PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER"})
NOT_LITERAL = frozenset("$`*?{}")
MAX_SHELL_DEPTH = 8  # sh -c 'sh -c ...' nesting analyzed before giving up
MAX_WRAPPERS = 16  # env nice timeout ... unwrapped before giving up
MAX_EXECS = 16  # find -exec ... judged before giving up
MAX_GLOBS = 16  # different globs of one command expanded before giving up
MAX_EXPANDED_WORDS = 2_000  # words the globs of one command may expand to

# Fork bombs: a function that starts itself again in the background or in a pipe. This and
# the admin's patterns are the only checks on raw text: a definition like this is easiest to
# recognize as written. Names start only at word boundaries and bodies are short: linear.
FUNCTION = re.compile(
    r"(?<![^\s;&|(){}])(?:function\s+([^\s(){}|&;<>]+)\s*(?:\(\s*\))?|([^\s(){}|&;<>]+)\s*\(\s*\))"
    r"\s*[{(]([^}]{0,200})"
)


# -- option tables ------------------------------------------------------------------------------

ENV_FLAGS = frozenset({"-i", "-", "-0", "-v", "--ignore-environment", "--null", "--debug"})
ENV_VALUED = frozenset(
    {"-u", "--unset", "-C", "--chdir", "--block-signal", "--default-signal", "--ignore-signal"}
)
TIME_FLAGS = frozenset(
    {"-p", "-a", "-v", "-q", "--portability", "--append", "--verbose", "--quiet"}
)
TIME_VALUED = frozenset({"-f", "--format", "-o", "--output"})
NICE_VALUED = frozenset({"-n", "--adjustment"})
EXEC_FLAGS = frozenset({"-c", "-l", "-cl", "-lc"})
TIMEOUT_FLAGS = frozenset({"--preserve-status", "--foreground", "-v", "--verbose"})
TIMEOUT_VALUED = frozenset({"-s", "--signal", "-k", "--kill-after"})
STDBUF_VALUED = frozenset({"-i", "-o", "-e", "--input", "--output", "--error"})
IONICE_FLAGS = frozenset({"-t", "--ignore"})
IONICE_VALUED = frozenset({"-c", "--class", "-n", "--classdata"})
SUDO_FLAGS = frozenset(
    {
        "-A", "-b", "-E", "-H", "-i", "-K", "-k", "-l", "-n", "-P", "-S", "-s", "-V", "-v",
        "-B", "-N", "-L", "--login", "--shell", "--preserve-env", "--non-interactive",
        "--askpass", "--background", "--set-home", "--stdin", "--bell", "--no-update",
    }
)  # fmt: skip
SUDO_VALUED = frozenset(
    {
        "-u", "-g", "-C", "-D", "-h", "-p", "-R", "-r", "-T", "-t", "-U", "--user", "--group",
        "--close-from", "--chdir", "--host", "--prompt", "--chroot", "--role", "--type",
        "--command-timeout", "--other-user",
    }
)  # fmt: skip
GIT_GLOBAL_FLAGS = frozenset(
    {
        "-p", "-P", "--paginate", "--no-pager", "--bare", "--no-replace-objects",
        "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
        "--no-optional-locks", "--no-advice",
    }
)  # fmt: skip
GIT_GLOBAL_VALUED = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
# Another repository's config can make git run programs (core.fsmonitor); -C only moves.
GIT_ELSEWHERE = ("--git-dir", "--work-tree")
# Subcommands that print committed file contents (log and whatchanged only with a patch).
GIT_CONTENT = frozenset(
    {"log", "whatchanged", "show", "diff", "grep", "blame", "cat-file", "archive", "annotate",
     "format-patch", "stash"}
)  # fmt: skip
GIT_PATCH_FLAGS = frozenset(
    {"-p", "-u", "--patch", "--patch-with-stat", "--cc", "-c", "--full-diff"}
)
GIT_SUMMARY_FLAGS = frozenset(
    {"--stat", "--name-only", "--name-status", "--shortstat", "--numstat", "--no-patch", "-s",
     "--quiet", "--summary", "--dirstat"}
)  # fmt: skip
# Subcommands that only read the repository, whatever their options.
GIT_READ_ONLY = frozenset(
    {"status", "rev-parse", "ls-files", "blame", "describe", "ls-tree", "cat-file",
     "count-objects", "rev-list", "merge-base", "for-each-ref", "show-ref", "name-rev"}
)  # fmt: skip
# Subcommands that only list with these words (`git remote -v`, `git stash list`).
GIT_LISTINGS = {
    "remote": frozenset({"-v", "--verbose"}),
    "stash": frozenset({"list"}),
    "tag": frozenset({"-l", "--list", "-n"}),
    "shortlog": frozenset({"-s", "-n", "-e", "-sn", "-sne", "HEAD"}),
    "reflog": frozenset(),
}
GIT_BRANCH_LISTING = frozenset(
    {"-a", "-r", "-v", "-vv", "--list", "-l", "--all", "--remotes", "--verbose", "--show-current"}
)
XARGS_VALUED = frozenset("adEILnPs")  # short options whose value may be the next word
XARGS_ATTACHED = frozenset("eil")  # short options whose optional value must be attached
XARGS_LONG_VALUED = frozenset(
    {"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}
)


# -- entry point --------------------------------------------------------------------------------


class Findings(Protocol):
    """Where the judge records its reasons (the policy's findings collector)."""

    def ask(self, reason: str) -> None: ...

    def deny(self, reason: str) -> None: ...


def judge_bash(
    command: str, safe_programs: frozenset[str], findings: Findings, workdir: Path | None = None
) -> None:
    """Record in `findings` why `command` must be asked about or denied; nothing if it may run.

    Only a command in the static subset (`runtime.risk.static_shell`) may run unasked: its
    globs are expanded against `workdir` and every word judged as bash will see it. Any other
    command asks, and is also walked with the full parser (`runtime.risk.shell`) for the
    denials and the reasons a human reads. Raw text is only checked for fork bombs here and
    for the admin's patterns (by the policy)."""
    if _is_fork_bomb(command):
        findings.deny("defines a fork bomb (a function that starts itself again)")
    judge = _BashJudge(safe_programs, findings, workdir)
    try:
        judge.static(parse_static(command))
    except NotStatic as exc:
        findings.ask(f"uses shell syntax the judge does not fully check: {exc}")
        _BashJudge(safe_programs, findings, workdir).judge(command)


# Forking without end in any language: `perl -e 'fork while 1'`, `while(1){os.fork()}`,
# `while true; do bash & done`.
ENDLESS_FORK = re.compile(
    r"\bfork\s+while\b|\bwhile\b[^\n]{0,60}?\bfork\b|\bos\.fork\(\)[^\n]{0,60}?\bwhile\b"
    r"|\bwhile\s+(?:true|1|:)\s*;?\s*do\b[^\n]{0,80}?&\s*(?:;\s*)?done\b"
)


def _is_fork_bomb(command: str) -> bool:
    if ENDLESS_FORK.search(command):
        return True
    for match in FUNCTION.finditer(command):
        name, body = match.group(1) or match.group(2), match.group(3)
        calls = re.findall(rf"(?<![\w.-]){re.escape(name)}(?![\w.-]|\s*\()", body)
        if calls and (len(calls) > 1 or re.search(r"[&|]", body)):
            return True
    return False


# -- the judge ----------------------------------------------------------------------------------

Check = Callable[[Sequence[str]], None]


class _Expanding(str):
    """An argv word that bash expands (`$x`, `*`, see Segment.expandable), or that a
    wrapper fills in (xargs input): its value when the command runs is unknown here."""

    __slots__ = ()


class _BashJudge:
    """Judges every segment of a parsed command, recursing into `sh -c` strings."""

    def __init__(
        self, safe_programs: frozenset[str], findings: Findings, workdir: Path | None = None
    ) -> None:
        self.safe_programs = safe_programs
        self.findings = findings
        self.workdir = workdir
        self.cwd = str(workdir) if workdir is not None else None  # as `cd` moves it
        self.home = home_directory()
        self.globs: dict[tuple[str, str], list[str] | None] = {}  # (pattern, cwd): matches
        self.expanded_words = 0
        self.variables: dict[str, str] = {}  # plain assignments seen, for the deny rules
        self.directory: str | None = None  # where a `cd` went, for the deny rules
        self.depth = 0
        # For "downloads piped to a shell": the pieces may sit in different segments.
        self.downloader: str | None = None
        self.shell: str | None = None
        self.piped = False
        self.wrappers: dict[str, Callable[[list[str]], list[str]]] = {
            "env": self._env,
            "nohup": self._nohup,
            "time": self._time,
            "nice": self._nice,
            "timeout": self._timeout,
            "stdbuf": self._stdbuf,
            "ionice": self._ionice,
            "command": self._command,
            "builtin": self._nohup,
            "exec": self._exec,
            "xargs": self._xargs,
            "sudo": self._sudo,
            "doas": self._sudo,
        }
        self.read_only_checks: dict[str, Check] = {
            "find": self._find,
            "rg": self._rg,
            "sort": self._sort,
            "uniq": self._uniq,
            "tree": self._tree,
            "file": self._file,
            "date": self._date,
            "printf": self._printf,
            "test": self._test,
            "[": self._test,
            "[[": self._conditional,
            "git": self._git,
            "sed": self._reason_of(program_scripts.sed_reason),
            "awk": self._reason_of(program_scripts.awk_reason),
            "gawk": self._reason_of(program_scripts.awk_reason),
            "mawk": self._reason_of(program_scripts.awk_reason),
            "jq": self._reason_of(program_scripts.jq_reason),
        }

    def ask(self, reason: str) -> None:
        self.findings.ask(reason)

    def deny(self, reason: str) -> None:
        self.findings.deny(reason)

    # -- walking the parse -------------------------------------------------------------------

    def judge(self, command: str) -> None:
        self.analysis(parse_shell(command))
        if self.downloader and self.shell and self.piped:
            self.ask(f"downloads piped to a shell ({self.downloader} | {self.shell})")

    def analysis(self, analysis: ShellAnalysis) -> None:
        if analysis.error is not None:
            self.ask(f"could not parse the command: {analysis.error}")
        if {"|", "|&"} & set(analysis.operators) or analysis.substitutions:
            self.piped = True
        judged: set[Segment] = set()
        for segment in analysis.segments:
            if segment not in judged:  # `a|a|a|...`: the same command judges the same
                judged.add(segment)
                self.segment(segment)

    def static(self, script: Script) -> None:
        """A command of the static subset: each simple command with its globs expanded in
        the directory it runs in, and every word that names a file judged by where it leads."""
        if "|" in script.operators:
            self.piped = True
        for command in script.commands:
            words = [path for word in command.words for path in self.expanded(word)]
            lead = command.assignments  # `NAME=value cmd`: the assignments, then the command
            redirects = tuple(Redirect(op, target.value) for op, target in command.redirects)
            segment = Segment(tuple(words[lead:]), redirects, tuple(words[:lead]))
            if segment.argv[:1] == ("cd",):
                self.change_directory(segment)
                continue
            for path in [*segment.argv[1:], *(r.target for r in redirects)]:
                self.linked(path)
            self.segment(segment)
        if self.downloader and self.shell and self.piped:
            self.ask(f"downloads piped to a shell ({self.downloader} | {self.shell})")

    def expanded(self, word: Word) -> list[str]:
        """The words bash makes of `word` in the current directory (globs expanded once)."""
        if word.pattern is None:
            return [word.value]
        if self.cwd is None:
            raise NotStatic("a glob, and no work directory to expand it in")
        key = (word.pattern, self.cwd)
        if key not in self.globs:
            if len(self.globs) >= MAX_GLOBS:
                raise NotStatic("more globs than the judge expands")
            self.globs[key] = expand(word.pattern, self.cwd)
        matches = self.globs[key] or [word.value]  # no match: bash keeps the word as written
        self.expanded_words += len(matches)
        if self.expanded_words > MAX_EXPANDED_WORDS:
            raise NotStatic("globs that expand to more words than are checked")
        for match in matches:
            if match.startswith("-"):
                self.ask(f"{word.value} matches {match}, which reads as an option")
        return matches

    def remember(self, segment: Segment) -> None:
        """What later commands' deny rules must know: plain variables (`R=/`) and the
        directory a `cd` moved to (`cd / && rm -rf *`)."""
        if not segment.argv:
            for assignment in segment.assignments:
                name, _, value = assignment.partition("=")
                self.variables[name] = value
        elif segment.argv[0] == "cd" and len(segment.argv) == 2:
            self.directory = self.substituted(segment.argv[1])

    def substituted(self, word: str) -> str:
        """`word` with the variables seen so far put in (`$R`, `${R}`); others stay."""
        if "$" not in word and "`" not in word:
            return word
        word = ECHOED.sub(lambda m: m.group(1) or m.group(2), word)  # $(echo /) is /
        return re.sub(
            r"\$\{?([A-Za-z_]\w*)\}?",
            lambda m: self.variables.get(
                m.group(1), HOME_WORDS[1] if m.group(1) == "HOME" else m.group(0)
            ),
            word,
        )

    def change_directory(self, segment: Segment) -> None:
        """`cd DIR`: later commands run there; only a directory inside the work dir."""
        target = segment.argv[1] if len(segment.argv) == 2 else None
        if segment.redirects or segment.assignments or target is None or self.cwd is None:
            self.ask("cd without exactly one directory (home, options, redirections)")
            return
        assert self.workdir is not None
        place = os.path.realpath(posixpath.join(self.cwd, target))
        root = str(self.workdir)
        if not os.path.isdir(place) or not (place == root or place.startswith(root + "/")):
            # Later words are then relative to a place the judge does not expand globs in.
            raise NotStatic(f"cd {target} leaves the work directory or is not a directory")
        self.cwd = place

    def linked(self, word: str) -> None:
        """A word naming a file (or `--opt=file`) through a symlink: judge where it leads."""
        if self.cwd is None or self.workdir is None:
            return
        for path in {word, word.partition("=")[2]} - {""}:
            if len(path) > 4096 or "\x00" in path:
                continue
            target = resolved(path, self.cwd, self.workdir)
            why = None if target is None else secret_location(target, self.home)
            if why:
                self.ask(f"reads {path}, which leads to {target} ({why})")

    def segment(self, segment: Segment) -> None:
        for redirect in segment.redirects:
            self.redirect(redirect)
        for assignment in segment.assignments:
            self.assignment(assignment, prefix=bool(segment.argv))
        words = [*segment.argv[1:], *segment.assignments, *(r.target for r in segment.redirects)]
        for word in words:
            why = _secret_location(word, self.home)
            if why:
                self.ask(f"reads {word} ({why})")
            if RAW_DEVICE.match(_normalize(word.partition("if=")[2] or word)):
                self.deny(f"reads the raw disk or memory device {word}")
        self.remember(segment)
        self.recursive_reach(segment.argv)
        expandable = segment.expandable
        self.command([_Expanding(w) if i in expandable else w for i, w in enumerate(segment.argv)])

    def command(self, words: Sequence[str]) -> None:
        """Unwrap wrappers (`env`, `sudo`, `xargs` ...) and judge the program they run."""
        argv = list(words)
        for _ in range(MAX_WRAPPERS + 1):
            wrapper = self.wrappers.get(_basename(argv[0])) if argv else None
            if wrapper is None or not _is_plain_program(argv[0]):
                break
            inner = wrapper(argv)
            if inner == argv[len(argv) - len(inner) :]:  # not rebuilt (env -S, xargs)
                self.wrapper_arguments(argv[0], argv[1 : len(argv) - len(inner)])
            argv = inner
        else:
            self.ask("wrappers are nested too deeply to check")
            return
        if argv and _is_plain_program(argv[0]) and _basename(argv[0]) in SHELLS:
            self.shell_command(argv)
        elif argv:
            self.program(argv)

    # -- redirections and assignments ------------------------------------------------------------

    def redirect(self, redirect: Redirect) -> None:
        op, target = redirect.op, redirect.target
        shown = f"{op} {target}"
        path = _normalize(target)
        if ">" not in op:
            if path.startswith(("/dev/tcp/", "/dev/udp/")):
                self.ask(f"opens a network connection ({shown})")
            return
        if op.endswith("&") and _is_fd(target):
            return  # 2>&1: duplicates a descriptor, writes no file
        if path in HARMLESS_DEVICES or path.startswith("/dev/fd/"):
            return
        if path.startswith("/dev/"):
            self.deny(f"writes to the device {target} through redirection ({shown})")
        else:
            self.ask(f"writes to {target} through redirection ({shown})")

    def assignment(self, assignment: str, prefix: bool = False) -> None:
        """`prefix`: the assignment stands before a command, which gets it in its
        environment (`http_proxy=... curl`), so lowercase names are not harmless there."""
        name, _, value = assignment.partition("=")
        name = name.removesuffix("+")
        inert = not any(ch in value for ch in "$`[](){}")
        if "[" in name:
            self.ask(f"assigns the array element {name} (its index is evaluated)")
        elif not inert:
            self.ask(f"assigns a computed value to {name}")
        elif name.islower() and not prefix:
            return  # a plain shell variable: no program reads it unless it is exported
        elif name in PAGER_ENV and value == "cat":
            return
        elif name not in HARMLESS_ENV and not name.startswith("LC_"):
            self.ask(f"sets {name}, which can change what a program runs")

    # -- wrappers: each returns the command it runs ----------------------------------------------

    def wrapper_arguments(self, wrapper: str, words: Sequence[str]) -> None:
        """A wrapper's own arguments must be known: `timeout $t ls` could split into
        `timeout 5 rm -rf x ls`."""
        for word in words:
            if isinstance(word, _Expanding):
                self.ask(f"{_basename(wrapper)} argument {word} may expand to other words")

    def _env(self, argv: list[str]) -> list[str]:
        index = 1
        while index < len(argv):
            arg = argv[index]
            if arg in ("-S", "--split-string"):
                text = argv[index + 1] if index + 1 < len(argv) else ""
                return self._env_split(text, argv[index + 2 :])
            if arg.startswith(("-S", "--split-string=")):
                text = arg.partition("=")[2] if arg.startswith("--") else arg[2:]
                return self._env_split(text, argv[index + 1 :])
            skip = _option_skip(arg, ENV_FLAGS, ENV_VALUED)
            if skip is None:
                break
            if skip < 0:
                self.ask(f"env option {arg} is not understood")
                skip = 1
            index += skip
        while index < len(argv) and _is_assignment_word(argv[index]):
            self.assignment(argv[index], prefix=True)
            index += 1
        return argv[index:]

    def _env_split(self, text: str, rest: list[str]) -> list[str]:
        """env -S 'words': env splits the string into the command's first words, with its own
        assignments and `${VAR}` expansion, which the words alone would not show."""
        if isinstance(text, _Expanding):
            self.ask(f"env -S runs words only known when it runs ({text})")
        analysis = parse_shell(text)
        if analysis.is_simple and "$" not in text:
            segment = analysis.segments[0]
            for assignment in segment.assignments:
                self.assignment(assignment, prefix=True)
            return [*segment.argv, *rest]
        self.ask(f"env -S runs a command that could not be understood ({text})")
        return []

    def _nohup(self, argv: list[str]) -> list[str]:
        return argv[2:] if argv[1:2] == ["--"] else argv[1:]

    def _time(self, argv: list[str]) -> list[str]:
        index = 1
        while index < len(argv) and argv[index].startswith("-"):
            arg = argv[index]
            if arg == "--":
                return argv[index + 1 :]
            if arg in ("-o", "--output") or arg.startswith("--output="):
                valued = arg in ("-o", "--output")
                target = (
                    (argv[index + 1] if index + 1 < len(argv) else "?")
                    if valued
                    else (arg.partition("=")[2])
                )
                self.ask(f"writes to {target} (time -o)")
            skip = _option_skip(arg, TIME_FLAGS, TIME_VALUED)
            if skip is None or skip < 0:
                self.ask(f"time option {arg} is not understood")
                skip = 1
            index += skip
        return argv[index:]

    def _nice(self, argv: list[str]) -> list[str]:
        index = 1
        while index < len(argv) and argv[index].startswith("-"):
            arg = argv[index]
            if arg == "--":
                return argv[index + 1 :]
            if arg.lstrip("-").lstrip("+").isdigit():
                index += 1  # nice -10
                continue
            skip = _option_skip(arg, frozenset(), NICE_VALUED)
            if skip is None or skip < 0:
                self.ask(f"nice option {arg} is not understood")
                skip = 1
            index += skip
        return argv[index:]

    def _timeout(self, argv: list[str]) -> list[str]:
        rest = self._skip_options("timeout", argv, TIMEOUT_FLAGS, TIMEOUT_VALUED)
        return rest[1:]  # the duration

    def _stdbuf(self, argv: list[str]) -> list[str]:
        return self._skip_options("stdbuf", argv, frozenset(), STDBUF_VALUED)

    def _ionice(self, argv: list[str]) -> list[str]:
        if any(
            arg in ("-p", "-P", "-u") or arg.startswith("--p") or arg == "--uid" for arg in argv
        ):
            self.ask("ionice changes the priority of other processes")
            return []
        return self._skip_options("ionice", argv, IONICE_FLAGS, IONICE_VALUED)

    def _command(self, argv: list[str]) -> list[str]:
        index = 1
        while index < len(argv) and argv[index].startswith("-") and argv[index] != "--":
            if "v" in argv[index] or "V" in argv[index]:
                return []  # command -v: looks the name up, runs nothing
            index += 1
        return argv[index + 1 :] if argv[index : index + 1] == ["--"] else argv[index:]

    def _exec(self, argv: list[str]) -> list[str]:
        return self._skip_options("exec", argv, EXEC_FLAGS, frozenset({"-a"}))

    def _xargs(self, argv: list[str]) -> list[str]:
        """xargs appends its input to the command it runs: judge that command."""
        index = 1
        while index < len(argv) and argv[index].startswith("-") and argv[index] != "-":
            arg = argv[index]
            if arg == "--":
                index += 1
                break
            index += _xargs_option_width(arg, has_next=index + 1 < len(argv))
        self.wrapper_arguments(argv[0], argv[1:index])
        replace = _xargs_replace_string(argv[1:index])
        inner = argv[index:] or ["echo"]
        if replace is None:
            return [*inner, _Expanding("the input of xargs")]  # appended to the command
        return [_Expanding(word) if replace in word else word for word in inner]

    def _sudo(self, argv: list[str]) -> list[str]:
        program = _basename(argv[0])
        self.ask(f"runs as root ({program})")
        rest = self._skip_options(program, argv, SUDO_FLAGS, SUDO_VALUED)
        if not rest and any(arg in ("-s", "-i", "--shell", "--login") for arg in argv):
            self.ask(f"opens a root shell ({program} {' '.join(argv[1:])})")
        return rest

    def _skip_options(
        self,
        program: str,
        argv: list[str],
        flags: frozenset[str],
        valued: frozenset[str],
    ) -> list[str]:
        """The words after `program`'s own options; unknown options ask."""
        index = 1
        while index < len(argv) and argv[index].startswith("-") and argv[index] != "-":
            arg = argv[index]
            if arg == "--":
                return argv[index + 1 :]
            skip = _option_skip(arg, flags, valued)
            if skip is None or skip < 0:
                self.ask(f"{program} option {arg} is not understood")
                skip = 1
            index += skip
        return argv[index:]

    # -- shells ------------------------------------------------------------------------------

    def shell_command(self, argv: Sequence[str]) -> None:
        """`bash -c 'string'`: judge the string as a command; anything else runs code that
        cannot be seen here (a script, or commands read from input)."""
        name = _basename(argv[0])
        self.shell = self.shell or name
        has_c, index = False, 1
        while index < len(argv) and argv[index][:1] in ("-", "+") and argv[index] not in ("-", "+"):
            arg = argv[index]
            index += 1
            if arg == "--":
                break
            if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                index += 1
            if arg in ("--login", "--rcfile", "--init-file") or (
                not arg.startswith("--") and ("l" in arg or "i" in arg)
            ):
                self.ask(f"{name} {arg} runs startup files")
            has_c = has_c or (not arg.startswith("--") and "c" in arg)
        operand = argv[index] if index < len(argv) else None
        if has_c and operand is not None:
            if isinstance(operand, _Expanding):
                self.ask(f"{name} -c runs a command only known when it runs ({operand})")
            self.nested_command(operand)
        elif operand is None or operand in ("-", "/dev/stdin") or operand.startswith("<("):
            self.ask(f"{name} runs commands from its input")
        else:
            self.ask(f"{name} runs the script {operand}")
            self.release_words(name, [operand])

    def nested_command(self, command: str) -> None:
        if self.depth >= MAX_SHELL_DEPTH:
            self.ask("shell commands are nested too deeply to check")
            return
        self.depth += 1
        try:
            self.analysis(parse_shell(command))
        finally:
            self.depth -= 1

    # -- programs ----------------------------------------------------------------------------

    def program(self, argv: Sequence[str]) -> None:
        word = argv[0]
        if isinstance(word, _Expanding) or not _is_literal(word):
            self.ask(f"program name is not a literal ({word})")
            return
        name = _basename(word)
        if not _is_system_word(word):
            self.ask(f"runs {word}, a program given by path rather than an installed one")
            self.release_words(name, argv[1:])
            return
        self.deny_rules(name, argv[1:])
        if name in self.safe_programs or name in READ_ONLY or _is_mkfs(name):
            return  # the admin's safe programs skip the ask rules, never the deny rules
        if name in FIXED_REASONS:
            self.ask(FIXED_REASONS[name])
            if name in ("curl", "wget"):
                self.downloader = self.downloader or name
            return
        check = self.read_only_checks.get(name)
        if check is not None:
            for arg in argv[1:] if name in OPTION_SENSITIVE else []:
                if isinstance(arg, _Expanding):
                    self.ask(f"{arg} may expand to an option of {name}")
            check(argv[1:])
            return
        if name in OTHER_SHELLS:
            self.ask(f"{name} runs commands in a syntax that is not analyzed")
            return
        if name.startswith(INTERPRETERS):
            if program_scripts.version_only(argv[1:]):
                return
            self.shell = self.shell or name
        flagged = self.release_words(name, argv[1:])
        flagged = self.package_install(name, argv[1:]) or flagged
        if not flagged:
            self.ask(f"{name} is not a known read-only program")

    def deny_rules(self, name: str, args: Sequence[str]) -> None:
        if name == "rm":
            self.rm_catastrophe(args)
        elif _is_mkfs(name):
            self.deny(f"{name} formats a filesystem (or wipes a disk)")
        elif name == "dd":
            for arg in args:
                target = _normalize(arg.removeprefix("of=")) if arg.startswith("of=") else ""
                if _is_device(target):
                    self.deny(f"dd writes to the device {arg[3:]}")
        elif name in FILE_WRITERS:
            for arg in args:
                path = arg.partition("=")[2] if arg.startswith("--") else arg
                if _is_device(_normalize(path)):
                    self.deny(f"{name} writes to the device {path}")
        elif name == "find":
            self.find_catastrophe(args)

    def find_catastrophe(self, args: Sequence[str]) -> None:
        """`find / -delete`, `find /usr -exec rm ...`: a whole system tree removed."""
        starts = [arg for arg in args[: next(
            (i for i, a in enumerate(args) if a.startswith(("-", "(", "!"))), len(args)
        )]]  # fmt: skip
        removes = "-delete" in args or any(
            args[i] in ("-exec", "-execdir", "-ok", "-okdir")
            and _basename(args[i + 1]) in ("rm", "shred", "unlink")
            for i in range(len(args) - 1)
        )
        for start in starts if removes else []:
            if any(_is_catastrophic(path) for path in _brace_variants(start)):
                self.deny(f"find {start} deletes a system or home directory tree")

    def recursive_reach(self, argv: Sequence[str]) -> None:
        """A recursive read from `/`, a system directory or the home directory reads every
        secret the host has: ask, even though the program only reads."""
        if not argv or _basename(argv[0]) not in RECURSIVE_READERS:
            return
        name, args = _basename(argv[0]), argv[1:]
        recursive = name in ("find", "rg", "du", "tree") or any(
            arg in ("--recursive", "--dereference-recursive", "-d")
            or (arg.startswith("-") and not arg.startswith("--") and set(arg) & set("rR"))
            for arg in args
        )
        for arg in args if recursive else []:
            if not arg.startswith("-") and _is_catastrophic(arg.rstrip("/") or "/"):
                self.ask(f"{name} reads all of {arg}, which holds the host's secrets")

    def rm_catastrophe(self, args: Sequence[str]) -> None:
        recursive, options, targets = False, True, []
        for arg in args:
            if options and arg == "--":
                options = False
            elif options and arg.startswith("--"):
                name = arg.partition("=")[0]
                if len(name) >= 3 and "--no-preserve-root".startswith(name):
                    self.deny("rm --no-preserve-root removes the protection of /")
                recursive = recursive or (len(name) >= 3 and "--recursive".startswith(name))
            elif options and arg.startswith("-") and len(arg) > 1:
                recursive = recursive or "r" in arg or "R" in arg
            else:
                targets.append(arg)
        for target in targets if recursive else []:
            path = self.substituted(target)
            if self.directory and not path.startswith(("/", "~", "$")):
                path = posixpath.join(self.directory, path)  # after `cd /`
            if any(_is_catastrophic(variant) for variant in _brace_variants(path)):
                self.deny(f"rm -r on {target} would delete a system or home directory")

    def release_words(self, name: str, args: Sequence[str]) -> bool:
        """Deploy, publish and release steps: `./deploy.sh`, `npm publish`, `make deploy`,
        `gh release create`, `npm run deploy:prod`."""
        positional = [arg for arg in args if not arg.startswith("-")]
        if name in TASK_RUNNERS:
            words = positional
        elif positional and positional[0] in SCRIPT_RUNNERS:
            words = positional[:2]
        else:
            words = positional[:1]
        for word in [name, *words]:
            if RELEASE_WORDS & set(re.split(r"[^a-z0-9]+", word.lower())):
                shown = name if word == name else f"{name} {word}"
                self.ask(f"looks like a deploy, publish or release step ({shown})")
                return True
        return False

    def package_install(self, name: str, args: Sequence[str]) -> bool:
        if name not in PACKAGE_MANAGERS:
            return False
        positional = [arg for arg in args if not arg.startswith("-")][:2]
        verb = next((i for i, word in enumerate(positional) if word in INSTALL_WORDS), None)
        if verb is None and not (name == "yarn" and not positional):  # bare `yarn` installs
            return False
        shown = [name, *positional[: 0 if verb is None else verb + 1]]
        self.ask(f"installs packages ({' '.join(shown)})")
        return True

    # -- read-only programs with dangerous options ---------------------------------------------

    def _find(self, args: Sequence[str]) -> None:
        index = execs = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                self.ask(f"find {arg} runs a command on each file")
                execs += 1
                if execs > MAX_EXECS:
                    self.ask("find runs more commands than are checked one by one")
                    return
                end = index
                while end < len(args) and args[end] not in (";", "+"):
                    end += 1
                self.command([word for word in args[index:end] if word != "{}"] or ["true"])
                index = end + 1  # one pass over the words, however many -exec there are
            elif arg == "-delete":
                self.ask("find -delete deletes files")
            elif arg in ("-fprint", "-fprint0", "-fprintf", "-fls"):
                self.ask(f"find {arg} writes to a file")

    def _rg(self, args: Sequence[str]) -> None:
        for arg in args:
            option = arg.partition("=")[0]
            if option == "--pre":
                self.ask("rg --pre runs a preprocessor program on each file")
            elif option == "--hostname-bin":
                self.ask("rg --hostname-bin runs a program")

    def _sort(self, args: Sequence[str]) -> None:
        for arg in args:
            if _long_option_is(arg, "--output") or _short_option_has(arg, "o", "kStT"):
                self.ask(f"sort {arg} writes to a file")
            if _long_option_is(arg, "--compress-program"):
                self.ask(f"sort {arg} runs a compression program")

    def _uniq(self, args: Sequence[str]) -> None:
        positional: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "--":
                positional.extend(args[index + 1 :])
                break
            if arg in ("-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"):
                index += 1
            elif not arg.startswith("-") or arg == "-":
                positional.append(arg)
            index += 1
        if len(positional) >= 2:
            self.ask(f"uniq writes its output to {positional[1]}")

    def _tree(self, args: Sequence[str]) -> None:
        for arg in args:
            if _short_option_has(arg, "o", "LPIH") or arg == "--output":
                self.ask(f"tree {arg} writes to a file")
            elif _short_option_has(arg, "R", "LPIH"):
                self.ask(f"tree {arg} writes files into each directory")

    def _file(self, args: Sequence[str]) -> None:
        if any(_short_option_has(arg, "C", "emFfmP") or arg == "--compile" for arg in args):
            self.ask("file -C writes a compiled magic file")

    def _date(self, args: Sequence[str]) -> None:
        if any(_long_option_is(a, "--set") or _short_option_has(a, "s", "dfrI") for a in args):
            self.ask("date -s sets the system clock")

    def _printf(self, args: Sequence[str]) -> None:
        if args and args[0].startswith("-v"):
            self.ask("printf -v assigns a shell variable")

    def _test(self, args: Sequence[str]) -> None:
        # bash evaluates the subscript of `test -v 'a[$(cmd)]'`, and of `a[x]` where x holds
        # such a text: whatever names a variable asks.
        for option in args:
            if option in ("-v", "-R"):
                self.ask(f"test {option} looks up a variable and evaluates an array subscript")

    def _conditional(self, args: Sequence[str]) -> None:
        """`[[ ... ]]`: as `test`, and its arithmetic comparisons evaluate variable names
        (`[[ x -eq 1 ]]` runs the code x may hold): only integers may stand beside them."""
        self._test(args)
        for index, word in enumerate(args):
            if word in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                for operand in (args[index - 1 : index], args[index + 1 : index + 2]):
                    if not operand or not re.fullmatch(r"-?\d+", operand[0]):
                        self.ask(f"[[ {word} ]] evaluates its operands as arithmetic")
                        return

    def _reason_of(self, check: Callable[[Sequence[str]], str | None]) -> Check:
        def judge(args: Sequence[str]) -> None:
            reason = check(args)
            if reason is not None:
                self.ask(reason)

        return judge

    # -- git ---------------------------------------------------------------------------------

    def _git(self, args: Sequence[str]) -> None:
        index = self._git_global_options(args)
        if index >= len(args):
            return  # `git`, `git --version`: usage and version
        subcommand, rest = args[index], args[index + 1 :]
        self._git_foreign_repository(args[:index])
        if subcommand in GIT_CONTENT:
            self._git_tracked_secrets(subcommand, rest)
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
            if subcommand != "grep" and _long_option_is(arg, "--output"):
                self.ask(f"git {subcommand} {arg} writes to a file")
            elif subcommand == "grep" and (
                _long_option_is(arg, "--open-files-in-pager")
                or _short_option_has(arg, "O", "efABCm")
            ):
                self.ask(f"git grep {arg} opens the files in a program")

    def _git_tracked_secrets(self, subcommand: str, rest: Sequence[str]) -> None:
        """git prints committed contents that the sandbox cannot mask: ask when it may print
        a secret the repository tracks (`.env` committed), unless only names or statistics
        are shown, or its pathspecs (after `--`) leave the secrets out."""
        patch = any(
            arg in GIT_PATCH_FLAGS or arg.startswith(("-L", "-U", "--unified")) for arg in rest
        )
        if subcommand in ("log", "whatchanged") and not patch:
            return  # commit messages only
        summary = any(arg in GIT_SUMMARY_FLAGS for arg in rest)
        if self.workdir is None or (summary and subcommand in ("show", "diff", "log")):
            return  # names and statistics only
        if (subcommand == "stash" and rest[:1] != ["show"]) or (
            subcommand == "cat-file" and {"-t", "-s", "-e"} & set(rest)
        ):
            return  # stash list, an object's type or size
        secrets = tracked_secrets(self.workdir)
        specs: Sequence[str] | None = None
        objects = [arg.partition(":")[2] for arg in rest if ":" in arg and not arg.startswith("-")]
        if "--" in rest:
            specs = rest[rest.index("--") + 1 :]
        elif subcommand in ("blame", "annotate"):
            specs = [arg for arg in rest if not arg.startswith("-")][-1:]  # the file
        elif subcommand in ("show", "cat-file") and objects:
            specs = objects  # HEAD:README.md
        if specs is not None:
            secrets = tuple(s for s in secrets if any(_covers(spec, s) for spec in specs))
        if secrets:
            self.ask(f"git {subcommand} may print {secrets[0]}, a secret the repository tracks")

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
        elif subcommand == "push" and _is_force_push(rest):
            self.ask("git push --force rewrites remote history")
        elif not self.release_words("git", [subcommand, *rest]):
            self.ask(f"git {subcommand} is not a known read-only git subcommand")


# -- option helpers -----------------------------------------------------------------------------


def _option_skip(arg: str, flags: frozenset[str], valued: frozenset[str]) -> int | None:
    """How many words an option takes: None if `arg` is not an option, -1 if unknown."""
    if not arg.startswith("-") or (arg == "-" and "-" not in flags):
        return None
    if arg in flags:
        return 1
    if arg in valued:
        return 2
    name = arg.partition("=")[0]
    if arg.startswith("--") and name in valued:
        return 1  # --signal=KILL
    if not arg.startswith("--") and arg[:2] in valued:
        return 1  # -sKILL
    return -1


def _xargs_replace_string(options: Sequence[str]) -> str | None:
    """The string xargs -I / -i / --replace replaces with each input line, if any."""
    replace = None
    for index, arg in enumerate(options):
        if arg == "-I" and index + 1 < len(options):
            replace = options[index + 1]
        elif arg.startswith(("-I", "-i")) and not arg.startswith("--"):
            replace = arg[2:] or "{}"
        elif arg.startswith("--replace"):
            replace = arg.partition("=")[2] or "{}"
    return replace


def _xargs_option_width(arg: str, has_next: bool) -> int:
    if arg.startswith("--"):
        return 2 if arg in XARGS_LONG_VALUED and has_next else 1
    for position, letter in enumerate(arg[1:], start=1):
        if letter in XARGS_ATTACHED:
            return 1
        if letter in XARGS_VALUED:
            return 2 if position == len(arg) - 1 and has_next else 1
    return 1


def _long_option_is(arg: str, option: str) -> bool:
    """`arg` is `option` or an abbreviation of it, as GNU getopt accepts (`--out=f`)."""
    name = arg.partition("=")[0]
    return name.startswith("--") and len(name) >= 3 and option.startswith(name)


def _short_option_has(arg: str, letter: str, takes_value: str) -> bool:
    """A cluster of short options (`-uo`) contains `letter` before any option that takes
    the rest of the cluster as its value."""
    if not arg.startswith("-") or arg.startswith("--"):
        return False
    for ch in arg[1:]:
        if ch == letter:
            return True
        if ch in takes_value:
            return False
    return False


def _is_force_push(args: Sequence[str]) -> bool:
    for arg in args:
        if arg.startswith("--force") or arg == "--mirror":
            return True
        if not arg.startswith("-") and arg.startswith("+"):
            return True  # +main: a forced refspec
        if arg.startswith("-") and not arg.startswith("--") and "f" in arg:
            return True
    return False


# -- word and path helpers ----------------------------------------------------------------------


def _is_plain_program(word: str) -> bool:
    return not isinstance(word, _Expanding) and _is_literal(word) and _is_system_word(word)


def _is_literal(word: str) -> bool:
    """A program word bash will not expand: no variables, substitutions, globs or braces."""
    if word in ("[", "[["):
        return True
    return bool(word) and not (set(word) & NOT_LITERAL or "[" in word or word.startswith("~"))


def _is_system_word(word: str) -> bool:
    """A bare name (looked up on PATH) or a path in a system bin directory, not `./ls`."""
    return "/" not in word or _normalize(posixpath.dirname(word)) in SYSTEM_BIN_DIRS


def _basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def _normalize(path: str) -> str:
    if not path.startswith("/"):
        return path
    return posixpath.normpath("/" + path.lstrip("/"))


def _secret_location(word: str, home: str | None = None) -> str | None:
    """Why reading `word` may expose secrets (read-only programs would otherwise run freely),
    or None. Globs that reach outside the work directory are refused too: `/pro?/1/envir*`."""
    why = secret_location(word, home)
    if why is None and any(c in word for c in "*?[") and word.startswith(("/", "~", "..")):
        return "a pattern that matches files outside the work directory"
    return why


def _covers(spec: str, path: str) -> bool:
    """Whether a git pathspec (a path, a directory or a glob) may include `path`."""
    spec = spec.rstrip("/").removeprefix("./")
    if spec in ("", ".", "*") or spec.startswith(":"):
        return True
    return path == spec or path.startswith(spec + "/") or fnmatch.fnmatchcase(path, spec)


MAX_BRACE_VARIANTS = 64


def _brace_variants(word: str) -> list[str]:
    """What brace expansion makes of `word` (`/{usr,etc}` -> `/usr`, `/etc`), bounded: for
    the deny rules, which must see every spelling of a catastrophe."""
    variants = [word]
    for _ in range(8):
        expanded: list[str] = []
        for variant in variants:
            match = re.search(r"\{([^{}]*,[^{}]*)\}", variant)
            if match is None:
                expanded.append(variant)
                continue
            for choice in match.group(1).split(","):
                expanded.append(variant[: match.start()] + choice + variant[match.end() :])
        if expanded == variants or len(expanded) > MAX_BRACE_VARIANTS:
            break
        variants = expanded[:MAX_BRACE_VARIANTS]
    return variants


def _is_fd(target: str) -> bool:
    return target == "-" or target.rstrip("-").isdigit()


def _is_mkfs(name: str) -> bool:
    """Programs that format or wipe a disk."""
    return name in ("mkfs", "mke2fs", "mkswap", "wipefs", "sfdisk", "fdisk", "parted") or (
        name.startswith("mkfs.")
    )


def _is_assignment_word(word: str) -> bool:
    name, equals, _ = word.partition("=")
    return bool(equals) and name.isidentifier() and name.isascii()


def _is_catastrophic(target: str) -> bool:
    """`/`, a top-level system directory, the home directory, or everything inside one."""
    for home in HOME_WORDS:
        if target == home or target.startswith(home + "/"):
            return target[len(home) :].strip("/") in ("", "*", ".")
    if not target.startswith("/"):
        return False
    path = _normalize(target)
    base = path.removesuffix("/*") or "/"
    if base in CATASTROPHIC_DIRS:
        return True
    # A glob at the top level (/u*, /[a-z]*) may match any of them.
    return base.count("/") == 1 and any(ch in base for ch in "*?[")


# -- "approve always" signatures ----------------------------------------------------------------


def command_signature(command: str) -> str | None:
    """The key for an "approve always" rule: the program, its subcommand for programs that
    have them, and its sorted flags (`rm -rf`, `git push --force`). None when no standing
    rule may cover the command: anything but one plain command, or one whose meaning the
    flags do not capture (wrappers, shells, variables, programs run by path)."""
    try:
        script = parse_static(command)
    except NotStatic:
        return None
    if any(word.pattern is not None for c in script.commands for word in c.words):
        return None  # `cp .e* x` expands to other files than the approved call named
    analysis = parse_shell(command)
    if not analysis.is_simple:
        return None
    segment = analysis.segments[0]
    if segment.assignments or segment.expandable or not segment.argv:
        return None  # `rm *` may expand to `rm -rf ...`
    word, rest = segment.argv[0], list(segment.argv[1:])
    name = _basename(word)
    if not _is_literal(word) or not _is_system_word(word) or name in NO_SIGNATURE:
        return None
    if name in MULTI_COMMAND and rest and rest[0].startswith("-"):
        return None  # options before the subcommand (git -c ...) change what it means
    if name == "git" and rest[:1] == ["push"] and any(arg.startswith("+") for arg in rest):
        return None  # +refspec forces a push without any flag
    positional = [arg for arg in rest if not arg.startswith("-")]
    kept = _signature_words(name, positional)
    flags = sorted({arg for arg in rest if arg.startswith("-")})
    return " ".join([name, *kept, *flags])


def _signature_words(name: str, positional: list[str]) -> list[str]:
    """The positional words that change what a command does, so a rule approved for
    `npm run test` or `make build` never covers `npm run deploy` or `make deploy`."""
    if name in TASK_RUNNERS:
        return positional
    kept = positional[:1] if name in MULTI_COMMAND else []
    if kept and kept[0] in SCRIPT_RUNNERS:
        kept = positional[:2]
    kept += [
        word
        for word in positional[len(kept) :]
        if RELEASE_WORDS & set(re.split(r"[^a-z0-9]+", word.lower()))
    ]
    return kept


NO_SIGNATURE = (
    frozenset(
        {
            "env", "nohup", "time", "nice", "timeout", "stdbuf", "ionice", "command",
            "builtin", "exec", "xargs", "sudo", "doas", "eval", "source", ".",
        }
    )
    | SHELLS
)  # fmt: skip
