"""sed, awk and jq take programs of their own: when one of those only reads.

Each check returns why the call must be asked about, or None when its options and its
program are known to read only. What is not recognized asks: these are small languages with
commands that write files (`w`, `print > f`), run programs (`e`, `system()`, `cmd | getline`)
or read files the command line never names (`r f`, `getline < f`, `--rawfile`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# sed: addresses (numbers, $, /regex/) and the read-only commands p, d, q, =, n, and `s` with
# flags that neither write (w) nor run (e): `-n '1,20p'`, `'s/a/b/g'`, `'/x/d'`, `'5q'`.
SED_COMMANDS = frozenset("pdqn=gGhHxlNPD")  # print, delete, quit, hold space: no I/O
SED_S_FLAGS = frozenset("gpiImM0123456789")
SED_FLAGS = frozenset(
    {"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate", "-u",
     "--unbuffered", "-z", "--null-data", "--posix", "--debug"}
)  # fmt: skip

AWK_FLAGS = frozenset({"--posix", "--traditional", "-P", "-c", "--characters-as-bytes"})
# Anything in an awk program that writes, runs, reads unnamed files (getline, or names set in
# ARGV / ARGC, also through SYMTAB) or reads the environment.
_AWK_DANGER = re.compile(
    r"system|getline|close|fflush|ENVIRON|PROCINFO|ARGV|ARGC|SYMTAB|@|[|>]|printf?\s*>"
)

JQ_FLAGS = frozenset(
    {"-r", "--raw-output", "-j", "--join-output", "-c", "--compact-output", "-S",
     "--sort-keys", "-s", "--slurp", "-n", "--null-input", "-e", "--exit-status", "-a",
     "--ascii-output", "-C", "--color-output", "-M", "--monochrome-output", "--tab", "-R",
     "--raw-input", "--seq", "--stream", "-0", "--raw-output0"}
)  # fmt: skip
JQ_VALUED = {"--indent": 1, "--arg": 2, "--argjson": 2}  # words each option takes
_JQ_DANGER = re.compile(r"\b(?:import|include|input_filename|\$__loc__|getpath|env)\b|\$ENV")

VERSION_FLAGS = frozenset({"--version", "-V", "-v", "--help", "-h"})


def sed_reason(args: Sequence[str]) -> str | None:
    scripts: list[str] = []
    operands: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-e", "--expression") and index + 1 < len(args):
            scripts.append(args[index + 1])
            index += 2
            continue
        if arg.startswith("--expression="):
            scripts.append(arg.partition("=")[2])
        elif arg.startswith("-") and arg != "-" and arg not in SED_FLAGS:
            if not (len(arg) > 2 and not arg.startswith("--") and set(arg[1:]) <= set("nErsuz")):
                return f"sed option {arg} is not known to only read (-i edits, -f reads a script)"
        elif not arg.startswith("-") or arg == "-":
            operands.append(arg)
        index += 1
    if not scripts:
        if not operands:
            return "sed without a script"
        scripts.append(operands[0])
    for script in scripts:
        if not _sed_reads_only(script):
            return f"the sed script {script!r} is not known to only read (w, e, r write or run)"
    return None


def _sed_reads_only(script: str) -> bool:
    pos = 0
    while True:
        while pos < len(script) and script[pos] in " \t\n;":
            pos += 1
        if pos >= len(script):
            return True
        for _ in range(2):  # an address, or a range of two
            pos = _sed_address(script, pos)
            if pos < len(script) and script[pos] == ",":
                pos += 1
                continue
            break
        if pos < 0 or pos >= len(script):
            return False
        pos += script[pos] == "!"
        command = script[pos : pos + 1]
        pos += 1
        if command == "q":
            while pos < len(script) and script[pos].isdigit():
                pos += 1
        elif command == "s":
            pos = _sed_substitution(script, pos)
            if pos < 0:
                return False
        elif command not in SED_COMMANDS:
            return False


def _sed_address(script: str, pos: int) -> int:
    """The position after an address at `pos` (the same if none); -1 if malformed."""
    if pos < 0 or pos >= len(script):
        return pos
    if script[pos] == "$":
        return pos + 1
    if script[pos].isdigit():
        while pos < len(script) and script[pos].isdigit():
            pos += 1
        return pos
    if script[pos] == "/":
        return _sed_delimited(script, pos + 1, "/")
    return pos


def _sed_delimited(script: str, pos: int, delimiter: str) -> int:
    """The position after the text that `delimiter` ends; -1 if it never does."""
    while pos < len(script):
        ch = script[pos]
        if ch == "\\":
            pos += 2
        elif ch == "\n":
            return -1
        elif ch == delimiter:
            return pos + 1
        else:
            pos += 1
    return -1


def _sed_substitution(script: str, pos: int) -> int:
    if pos >= len(script) or script[pos] in "\\\n":
        return -1
    delimiter = script[pos]
    pos = _sed_delimited(script, pos + 1, delimiter)
    if pos < 0:
        return -1
    pos = _sed_delimited(script, pos, delimiter)
    while 0 <= pos < len(script) and script[pos] in SED_S_FLAGS:
        pos += 1
    return pos


def awk_reason(args: Sequence[str]) -> str | None:
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] != "-":
        arg = args[index]
        if arg == "--":
            index += 1
            break
        if arg in ("-F", "-v") and index + 1 < len(args):
            index += 2
            continue
        if not (arg.startswith(("-F", "-v")) or arg in AWK_FLAGS):
            return f"awk option {arg} is not known to only read (-f and -i load programs)"
        index += 1
    if index >= len(args):
        return "awk without a program"
    program = args[index]
    if _AWK_DANGER.search(program):
        return "the awk program may write files, run commands or read unnamed files"
    return None


def jq_reason(args: Sequence[str]) -> str | None:
    index = 0
    filters: list[str] = []
    while index < len(args):
        arg = args[index]
        if arg in JQ_FLAGS:
            index += 1
        elif arg in JQ_VALUED:
            index += 1 + JQ_VALUED[arg]
        elif arg.startswith("-") and arg != "-":
            return f"jq option {arg} is not known to only read (--rawfile, -L and -f read files)"
        else:
            filters.append(arg)  # the filter, then input files
            index += 1
    if filters and _JQ_DANGER.search(filters[0]):
        return "the jq filter loads modules or reads the environment"
    return None


def version_only(args: Sequence[str]) -> bool:
    """`python3 --version`: an interpreter asked only for its version or help."""
    return len(args) == 1 and args[0] in VERSION_FLAGS
