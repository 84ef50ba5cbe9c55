"""Helpers of the bash judge for single words: options, program names, paths."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from runtime.risk.secrets import secret_location
from runtime.risk.tables import (
    CATASTROPHIC_DIRS,
    FOLLOWING_LINKS,
    HOME_WORDS,
    NOT_LITERAL,
    PATTERN_FIRST,
    PATTERN_LONG,
    RECURSIVE_LONG,
    RECURSIVE_READERS,
    SYSTEM_BIN_DIRS,
    XARGS_ATTACHED,
    XARGS_LONG_VALUED,
    XARGS_VALUED,
)


class Expanding(str):
    """An argv word that bash expands (`$x`, `*`, see Segment.expandable), or that a
    wrapper fills in (xargs input): its value when the command runs is unknown here."""

    __slots__ = ()


# -- option helpers -----------------------------------------------------------------------------


def option_skip(arg: str, flags: frozenset[str], valued: frozenset[str]) -> int | None:
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


def xargs_replace_string(options: Sequence[str]) -> str | None:
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


def xargs_option_width(arg: str, has_next: bool) -> int:
    if arg.startswith("--"):  # --max-args 5 (but --max-args=5 is one word)
        return 2 if arg in XARGS_LONG_VALUED and has_next else 1
    for position, letter in enumerate(arg[1:], start=1):
        if letter in XARGS_ATTACHED:
            return 1
        if letter in XARGS_VALUED:
            return 2 if position == len(arg) - 1 and has_next else 1
    return 1


def long_option_is(arg: str, option: str) -> bool:
    """`arg` is `option` or an abbreviation of it, as GNU getopt accepts (`--out=f`)."""
    name = arg.partition("=")[0]
    return name.startswith("--") and len(name) >= 3 and option.startswith(name)


def short_option_has(arg: str, letter: str, takes_value: str) -> bool:
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


def is_recursive(name: str, args: Sequence[str]) -> bool:
    """Whether `name args` reads directory trees (`grep -rn`, `cp -a`, `ls -R`, any `find`)."""
    letters = RECURSIVE_READERS.get(name)
    if letters is None:
        return name in RECURSIVE_READERS
    for arg in args:
        if arg == "--":
            return False
        if arg == "-d" or any(long_option_is(arg, option) for option in RECURSIVE_LONG):
            return True  # grep -d recurse / --directories=recurse; abbreviations too
        if arg.startswith("-") and not arg.startswith("--") and set(arg[1:]) & set(letters):
            return True
    return False


def pattern_word(name: str, args: Sequence[str]) -> int | None:
    """The index in `args` of a searcher's pattern operand (`grep -rn PATTERN dir`), or None
    (not a searcher, or -e / -f give the patterns). Only options known to take a value skip
    a word, so a mistake here judges one word more, never one fewer."""
    valued = PATTERN_FIRST.get(name)
    if valued is None:
        return None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return index + 1 if index + 1 < len(args) else None
        if not arg.startswith("-") or arg == "-":
            return index
        if any(long_option_is(arg, option) for option in PATTERN_LONG):
            return None  # `--reg=x`, `--files`: every operand is a file
        if not arg.startswith("--"):
            letters = arg[1:]
            first = next((i for i, ch in enumerate(letters) if ch in valued), None)
            if first is not None and letters[first] in "ef":
                return None  # -e PATTERN, -nfpatterns: every operand is a file
            if first is not None and first == len(letters) - 1:
                index += 1  # `-A 3`, `-nA 3`: the next word is the value
        index += 1
    return None


def follows_links(name: str, args: Sequence[str]) -> bool:
    """Whether a recursive read follows the symlinks it finds (`grep -R`, `rg -L`, `find -L`,
    `diff -r` always), and so reads what they lead to."""
    letters = FOLLOWING_LINKS.get(name)
    if letters is None:
        return False
    if not letters:
        return True
    for arg in args:
        if arg == "--":
            return False
        if arg == "-follow" or arg.partition("=")[0] in (
            "--dereference-recursive",
            "--follow",
            "--dereference",
        ):
            return True
        if arg.startswith("-") and not arg.startswith("--") and set(arg[1:]) & set(letters):
            return True
    return False


def is_force_push(args: Sequence[str]) -> bool:
    for arg in args:
        if arg.startswith("--force") or arg == "--mirror":
            return True
        if not arg.startswith("-") and arg.startswith("+"):
            return True  # +main: a forced refspec
        if arg.startswith("-") and not arg.startswith("--") and "f" in arg:
            return True
    return False


# -- word and path helpers ----------------------------------------------------------------------


def is_plain_program(word: str) -> bool:
    return not isinstance(word, Expanding) and is_literal(word) and is_system_word(word)


def is_literal(word: str) -> bool:
    """A program word bash will not expand: no variables, substitutions, globs or braces."""
    if word in ("[", "[["):
        return True
    return bool(word) and not (set(word) & NOT_LITERAL or "[" in word or word.startswith("~"))


def is_system_word(word: str) -> bool:
    """A bare name (looked up on PATH) or a path in a system bin directory, not `./ls`."""
    return "/" not in word or normalize(posixpath.dirname(word)) in SYSTEM_BIN_DIRS


def basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def normalize(path: str) -> str:
    if not path.startswith("/"):
        return path
    return posixpath.normpath("/" + path.lstrip("/"))


def risky_read(word: str, home: str | None = None) -> str | None:
    """Why reading `word` may expose secrets (read-only programs would otherwise run freely),
    or None. Globs that reach outside the work directory are refused too: `/pro?/1/envir*`."""
    why = secret_location(word, home)
    if why is None and any(c in word for c in "*?[") and word.startswith(("/", "~", "..")):
        return "a pattern that matches files outside the work directory"
    return why


def path_candidates(word: str) -> set[str]:
    """The paths a word may name: itself, an option's value (`--file=x`, `if=x`) and a short
    option's attached path (`-I../lib`, `-f/srv/list`)."""
    candidates = {word, word.partition("=")[2]}
    if word.startswith("-") and not word.startswith("--") and "/" in word[2:]:
        candidates.add(word[2:])
    return candidates - {""}


def shown_place(word: str, place: str) -> str:
    """`word`, and where it leads when that is not what it says."""
    return word if place == normalize(word) else f"{word}, which leads to {place}"


MAX_BRACE_VARIANTS = 64


def brace_variants(word: str) -> list[str]:
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


def is_fd(target: str) -> bool:
    return target == "-" or target.rstrip("-").isdigit()


def is_mkfs(name: str) -> bool:
    """Programs that format or wipe a disk."""
    return name in ("mkfs", "mke2fs", "mkswap", "wipefs", "sfdisk", "fdisk", "parted") or (
        name.startswith("mkfs.")
    )


def is_assignment_word(word: str) -> bool:
    name, equals, _ = word.partition("=")
    return bool(equals) and name.isidentifier() and name.isascii()


def is_catastrophic(target: str) -> bool:
    """`/`, a top-level system directory, the home directory, or everything inside one."""
    for home in HOME_WORDS:
        if target == home or target.startswith(home + "/"):
            return target[len(home) :].strip("/") in ("", "*", ".")
    if not target.startswith("/"):
        return False
    path = normalize(target)
    base = path.removesuffix("/*") or "/"
    if base in CATASTROPHIC_DIRS:
        return True
    # A glob at the top level (/u*, /[a-z]*) may match any of them.
    return base.count("/") == 1 and any(ch in base for ch in "*?[")
