"""The bash judge's tables: which programs only read, which ask and why, their options, and
the limits of what it checks one by one."""

from __future__ import annotations

import re

# -- program tables -----------------------------------------------------------------------------

# Read-only programs without dangerous options (those with some: _BashJudge.read_only_checks).
READ_ONLY = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo", "true",
        "false", "whoami", "uname", "basename", "dirname", "realpath", "stat", "du", "df",
        "cut", "tr", "diff", "cmp", "which", "type", "sleep", "nl", "tac", "rev", "paste",
        "join", "comm", "column", "md5sum", "sha1sum", "sha256sum", "sha512sum", "seq", "id",
        "printenv", "expr", "readlink", "locale", "nproc", "arch", "tty",
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
    "cpio": "cpio takes file names from its input, which the judge cannot see",
    "parallel": "parallel takes commands and file names from its input, which the judge cannot see",
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
# Some always do; the others with these short options (or --recursive and the like).
RECURSIVE_READERS = {
    "find": None, "rg": None, "du": None, "tree": None, "grep": "rR", "egrep": "rR",
    "fgrep": "rR", "ls": "R", "diff": "r", "cp": "rRa",
}  # fmt: skip
RECURSIVE_LONG = ("--recursive", "--dereference-recursive", "--archive", "--directories")
# Recursive readers that follow the links they find with these short options (or --follow,
# --dereference...); "": always (GNU diff reads what a link leads to).
FOLLOWING_LINKS = {
    "grep": "R", "egrep": "R", "fgrep": "R", "rg": "L", "tree": "l", "du": "L", "ls": "L",
    "cp": "L", "find": "L", "diff": "",
}  # fmt: skip
# Options that make a program take the names of the files it reads from data (a list file,
# its input) the judge cannot see: program -> (long option, short option, short options whose
# value is the rest of their cluster).
NAMES_FROM_DATA = {
    "wc": ("--files0-from", "", ""),
    "du": ("--files0-from", "", ""),
    "sort": ("--files0-from", "", ""),
    "file": ("--files-from", "f", "eFmP"),
    "tar": ("--files-from", "T", ""),
    "rsync": ("--files-from", "", ""),
    "md5sum": ("--check", "c", ""),
    "sha1sum": ("--check", "c", ""),
    "sha256sum": ("--check", "c", ""),
    "sha512sum": ("--check", "c", ""),
}
# Searchers whose first operand is a pattern (unless -e or -f gives it), and their short
# options that take a value: the pattern (`grep -rn /tmp src`) names no file to read.
PATTERN_FIRST = {
    "grep": "efmABCdD", "egrep": "efmABCdD", "fgrep": "efmABCdD", "rg": "efgtTmABCjMrE",
}  # fmt: skip
# Long options (or any abbreviation of one) after which every operand is a file: the
# patterns come from -e / -f, or there are none (`rg --files`).
PATTERN_LONG = ("--regexp", "--file", "--files", "--type-list")
# Programs that open none of their words (the judge does not ask where those lead).
NO_FILE_ARGS = frozenset(
    {"echo", "printf", "true", "false", "basename", "dirname", "seq", "expr", "sleep", "which",
     "type", "id", "test", "[", "[["}
)  # fmt: skip
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
# `git log` options that print commit metadata only (no patch), alone or with `=value`.
GIT_LOG_METADATA = frozenset(
    {"--oneline", "--graph", "--decorate", "--all", "--stat", "--shortstat", "--name-only",
     "--name-status", "--no-merges", "--merges", "--reverse", "--first-parent", "--no-color",
     "--abbrev-commit", "--date-order", "--topo-order", "--no-patch", "-s", "--source"}
)  # fmt: skip
GIT_LOG_METADATA_VALUED = frozenset(
    {"-n", "--max-count", "--format", "--pretty", "--since", "--until", "--after", "--before",
     "--author", "--committer", "--grep", "--date", "--skip", "--abbrev", "--color"}
)  # fmt: skip
# `git diff` options that print names and statistics only.
GIT_DIFF_SUMMARY = frozenset(
    {"--stat", "--name-only", "--name-status", "--shortstat", "--numstat", "--no-color", "--"}
)
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
# Every long option of xargs that takes no separate value, spelled out: getopt also takes
# any unique abbreviation (`--process` for `--process-slot-var VAR`), and those ask.
XARGS_LONG_FLAGS = frozenset(
    {"--null", "--no-run-if-empty", "--verbose", "--show-limits", "--exit", "--open-tty",
     "--interactive", "--help", "--version", "--replace", "--eof", "--max-lines"}
)  # fmt: skip
