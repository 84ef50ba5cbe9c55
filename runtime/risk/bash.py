"""The bash rules of the risk policy (tables in `tables`, git in `git`, words in `words`).

`judge_bash` records why a command asks or is denied: wrappers are unwrapped, `sh -c` strings
recursed into, and every program checked against the tables below. ALLOW needs every simple
command to be a known read-only program used in a read-only way (see `runtime.risk.policy`).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from runtime.risk import program_scripts
from runtime.risk.git import GitRules
from runtime.risk.reach import is_system, link_out, outside
from runtime.risk.secrets import (
    HARMLESS_DEVICES,
    home_directory,
    resolved,
    secret_location,
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
from runtime.risk.tables import (
    ECHOED,
    FILE_WRITERS,
    FIXED_REASONS,
    FUNCTION,
    HARMLESS_ENV,
    HOME_WORDS,
    INSTALL_WORDS,
    INTERPRETERS,
    MAX_EXECS,
    MAX_EXPANDED_WORDS,
    MAX_GLOBS,
    MAX_SHELL_DEPTH,
    MAX_WRAPPERS,
    NAMES_FROM_DATA,
    NO_FILE_ARGS,
    OPTION_SENSITIVE,
    OTHER_SHELLS,
    PACKAGE_MANAGERS,
    PAGER_ENV,
    RAW_DEVICE,
    READ_ONLY,
    RECURSIVE_READERS,
    RELEASE_WORDS,
    SCRIPT_RUNNERS,
    SHELLS,
    TASK_RUNNERS,
)
from runtime.risk.words import (
    Expanding,
    basename,
    brace_variants,
    follows_links,
    is_catastrophic,
    is_fd,
    is_literal,
    is_mkfs,
    is_plain_program,
    is_recursive,
    is_system_word,
    long_option_is,
    normalize,
    path_candidates,
    pattern_word,
    risky_read,
    short_option_has,
    shown_place,
)
from runtime.risk.wrappers import WrapperRules

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


class _BashJudge(WrapperRules, GitRules):
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
            name = basename(segment.argv[0]) if segment.argv else ""
            pattern = pattern_word(name, segment.argv[1:])
            for index, path in enumerate(segment.argv[1:]):
                self.linked(path, reads=name not in NO_FILE_ARGS and index != pattern)
            for redirect in redirects:
                self.linked(redirect.target, reads=True)
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

    def linked(self, word: str, reads: bool) -> None:
        """A word naming a file (or `--opt=file`, `-Ipath`): judge where it really leads, a
        secret through a symlink, or (when the program opens its words: `reads`) a place
        outside the work directory that the unapproved sandbox would not show either."""
        if self.cwd is None or self.workdir is None:
            return
        for path in path_candidates(word):
            target = resolved(path, self.cwd, self.workdir, existing=True)
            why = None if target is None else secret_location(target, self.home)
            if why:
                self.ask(f"reads {path}, which leads to {target} ({why})")
                continue
            if not reads or risky_read(path, self.home):
                continue  # reads nothing, or asked about as written (segment)
            place = outside(path, self.cwd, self.workdir)
            written = normalize(posixpath.join(self.cwd, path))  # a system file's own link
            if place is not None and not is_system(place) and not is_system(written):
                self.ask(f"reads {shown_place(path, place)}, outside the work directory")

    def segment(self, segment: Segment) -> None:
        for redirect in segment.redirects:
            self.redirect(redirect)
        for assignment in segment.assignments:
            self.assignment(assignment, prefix=bool(segment.argv))
        words = [*segment.argv[1:], *segment.assignments, *(r.target for r in segment.redirects)]
        for word in words:
            value = word.partition("=")[2] if word.startswith("-") else ""  # --file=.envrc
            why = risky_read(word, self.home) or (value and risky_read(value, self.home))
            if why:
                self.ask(f"reads {word} ({why})")
            if RAW_DEVICE.match(normalize(word.partition("if=")[2] or word)):
                self.deny(f"reads the raw disk or memory device {word}")
        self.remember(segment)
        expandable = segment.expandable
        self.command([Expanding(w) if i in expandable else w for i, w in enumerate(segment.argv)])

    def command(self, words: Sequence[str]) -> None:
        """Unwrap wrappers (`env`, `sudo`, `xargs` ...) and judge the program they run."""
        argv = list(words)
        for _ in range(MAX_WRAPPERS + 1):
            wrapper = self.wrappers.get(basename(argv[0])) if argv else None
            if wrapper is None or not is_plain_program(argv[0]):
                break
            inner = wrapper(argv)
            if inner == argv[len(argv) - len(inner) :]:  # not rebuilt (env -S, xargs)
                self.wrapper_arguments(argv[0], argv[1 : len(argv) - len(inner)])
            argv = inner
        else:
            self.ask("wrappers are nested too deeply to check")
            return
        if argv and is_plain_program(argv[0]) and basename(argv[0]) in SHELLS:
            self.shell_command(argv)
        elif argv:
            self.program(argv)

    # -- redirections and assignments ------------------------------------------------------------

    def redirect(self, redirect: Redirect) -> None:
        op, target = redirect.op, redirect.target
        shown = f"{op} {target}"
        path = normalize(target)
        if ">" not in op:
            if path.startswith(("/dev/tcp/", "/dev/udp/")):
                self.ask(f"opens a network connection ({shown})")
            return
        if op.endswith("&") and is_fd(target):
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

    # -- shells ------------------------------------------------------------------------------

    def shell_command(self, argv: Sequence[str]) -> None:
        """`bash -c 'string'`: judge the string as a command; anything else runs code that
        cannot be seen here (a script, or commands read from input)."""
        name = basename(argv[0])
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
            if isinstance(operand, Expanding):
                self.ask(f"{name} -c runs a command only known when it runs ({operand})")
            self.nested_command(operand)
        elif operand is None or operand in ("-", "/dev/stdin") or operand.startswith("<("):
            self.ask(f"{name} runs commands from its input")
        else:
            self.ask(f"{name} runs the script {operand}")
            self.release_words(name, [operand])

    def nested_command(self, command: str) -> None:
        """A shell's `-c` string is held to the same rule as the command itself: only the
        static subset runs unasked (globs expanded where it runs); anything else asks and is
        walked with the full parser for its reasons and denials."""
        if self.depth >= MAX_SHELL_DEPTH:
            self.ask("shell commands are nested too deeply to check")
            return
        self.depth += 1
        cwd = self.cwd
        try:
            self.static(parse_static(command))
        except NotStatic as exc:
            self.ask(f"runs a shell command the judge does not fully check: {exc}")
            self.analysis(parse_shell(command))
        finally:
            self.depth -= 1
            self.cwd = cwd  # the inner shell's `cd` ends with it

    # -- programs ----------------------------------------------------------------------------

    def program(self, argv: Sequence[str]) -> None:
        word = argv[0]
        if isinstance(word, Expanding) or not is_literal(word):
            self.ask(f"program name is not a literal ({word})")
            return
        name = basename(word)
        if not is_system_word(word):
            self.ask(f"runs {word}, a program given by path rather than an installed one")
            self.release_words(name, argv[1:])
            return
        self.recursive_reach(name, argv[1:])
        self.deny_rules(name, argv[1:])
        self.names_from_data(name, argv[1:])  # what the admin's safe programs read, too
        if name in self.safe_programs or name in READ_ONLY or is_mkfs(name):
            return  # the admin's safe programs skip the ask rules, never the deny rules
        if name in FIXED_REASONS:
            self.ask(FIXED_REASONS[name])
            if name in ("curl", "wget"):
                self.downloader = self.downloader or name
            return
        check = self.read_only_checks.get(name)
        if check is not None:
            for arg in argv[1:] if name in OPTION_SENSITIVE else []:
                if isinstance(arg, Expanding):
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
        elif is_mkfs(name):
            self.deny(f"{name} formats a filesystem (or wipes a disk)")
        elif name == "dd":
            for arg in args:
                target = normalize(arg.removeprefix("of=")) if arg.startswith("of=") else ""
                if _is_device(target):
                    self.deny(f"dd writes to the device {arg[3:]}")
        elif name in FILE_WRITERS:
            for arg in args:
                path = arg.partition("=")[2] if arg.startswith("--") else arg
                if _is_device(normalize(path)):
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
            and basename(args[i + 1]) in ("rm", "shred", "unlink")
            for i in range(len(args) - 1)
        )
        for start in starts if removes else []:
            if any(is_catastrophic(path) for path in brace_variants(start)):
                self.deny(f"find {start} deletes a system or home directory tree")

    def recursive_reach(self, name: str, args: Sequence[str]) -> None:
        """A recursive read reads whatever a tree holds: from `/`, a system directory or the
        home directory every secret the host has, and from anywhere else outside the work
        directory (another checkout, /srv, `..`, a link that leads there when the program
        follows links) what no mask of the work dir hides: ask, even though it only reads."""
        if name not in RECURSIVE_READERS or not is_recursive(name, args):
            return
        pattern = pattern_word(name, args)  # `grep -r /tmp src`: /tmp is what it looks for
        words = [
            arg
            for index, arg in enumerate(args)
            if not isinstance(arg, Expanding) and not arg.startswith("-") and index != pattern
        ]
        places: dict[str, str | None] = {}
        for arg in words:
            if self.cwd is not None and self.workdir is not None:
                places[arg] = outside(arg, self.cwd, self.workdir)
            if is_catastrophic(arg.rstrip("/") or "/"):
                self.ask(f"{name} reads all of {arg}, which holds the host's secrets")
            elif places.get(arg) is not None:
                shown = shown_place(arg, places[arg] or arg)
                self.ask(f"{name} reads all of {shown}, outside the work directory")
        if self.cwd is None or self.workdir is None or not follows_links(name, args):
            return
        cwd = self.cwd
        existing = [
            arg
            for arg, place in places.items()
            if place is None and os.path.lexists(posixpath.join(cwd, arg))
        ]
        for start in existing or ["."]:  # no place named: the program reads `.`
            why = link_out(start, cwd, self.workdir)
            if why is not None:
                self.ask(f"{name} {why}")

    def names_from_data(self, name: str, args: Sequence[str]) -> None:
        """`wc --files0-from=list`, `tar -T list`, `md5sum -c sums`: the files read are
        named in data (a file, the input) that the judge never sees."""
        option = NAMES_FROM_DATA.get(name)
        if option is None:
            return
        long, short, valued = option
        for arg in args:
            if arg == "--":
                return
            if long_option_is(arg, long) or (short and short_option_has(arg, short, valued)):
                self.ask(f"{name} {arg} takes file names from data, which the judge cannot see")
                return

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
            if any(is_catastrophic(variant) for variant in brace_variants(path)):
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
            elif arg == "-files0-from":
                self.ask("find -files0-from takes file names from data, which the judge cannot see")
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
            if long_option_is(arg, "--output") or short_option_has(arg, "o", "kStT"):
                self.ask(f"sort {arg} writes to a file")
            if long_option_is(arg, "--compress-program"):
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
            if short_option_has(arg, "o", "LPIH") or arg == "--output":
                self.ask(f"tree {arg} writes to a file")
            elif short_option_has(arg, "R", "LPIH"):
                self.ask(f"tree {arg} writes files into each directory")

    def _file(self, args: Sequence[str]) -> None:
        if any(
            short_option_has(arg, "C", "emFfmP") or long_option_is(arg, "--compile") for arg in args
        ):
            self.ask("file -C writes a compiled magic file")

    def _date(self, args: Sequence[str]) -> None:
        if any(long_option_is(a, "--set") or short_option_has(a, "s", "dfrI") for a in args):
            self.ask("date -s sets the system clock")
        if any(long_option_is(a, "--file") or short_option_has(a, "f", "dsrI") for a in args):
            self.ask("date -f reads a file, which its errors print")

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
