"""The fully static subset of bash: the only commands the judge may let run without asking.

`runtime.risk.shell` follows bash's whole grammar to find every command a line could run,
for the reasons a human reads. Letting a command run unasked needs more than finding its
commands: every word must mean the same to the judge as to bash. This module accepts only
words that are static after quote removal (no parameter, arithmetic, command or process
substitution, no brace or tilde expansion, no heredoc, no blocks, loops or functions) joined
by `;`, `&&`, `||`, `|` and newlines, with plain redirections. Globs are kept as patterns for
the judge to expand against the disk. Anything else is refused with the reason, in one linear
pass: there is no second bash implementation to disagree with the first.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field

OPERATORS = ("&&", "||", ";", "|", "\n")
RESERVED = frozenset(
    {
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
        "do", "done", "in", "function", "coproc", "{", "}", "[[", "]]", "!",
    }
)  # fmt: skip
REDIRECTS = ("&>>", "<<<", "&>", ">>", ">&", "<&", ">|", "<>", "<<", ">", "<")
ALLOWED_REDIRECTS = frozenset({">", ">>", "<", "&>", "&>>", ">&", "<<<"})
ARRAY_WORD = re.compile(r"[A-Za-z_]\w*\[")
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*\+?=")
WORD_END = frozenset(" \t\n;&|<>")
REFUSED_IN_WORDS = {
    "$": "an expansion or substitution ('$' or a backquote)",
    "`": "an expansion or substitution ('$' or a backquote)",
    "(": "parentheses (subshells, functions, arrays, extended globs)",
    ")": "parentheses (subshells, functions, arrays, extended globs)",
}
# Characters that mean nothing special to the word reader: read in runs.
PLAIN_RUN = re.compile(r"[^ \t\n;&|<>'\"\\$`(){}~*?\[\]\x00-\x1f\x7f]+")
MAX_MATCHES = 500
MAX_GLOB_DEPTH = 8  # directory levels of one glob
MAX_COMMANDS = 100  # simple commands, and words, judged one by one; a longer command asks
MAX_WORDS = 1_000  # files one glob may expand to before the judge gives up and asks


class NotStatic(ValueError):
    """Why a command is outside the static subset."""


@dataclass(slots=True)
class Word:
    value: str  # after quote removal
    pattern: str | None = None  # a glob pattern (quoted parts escaped) if bash expands it
    quoted: bool = False
    lead: str = ""  # the unquoted text before any quoting: where `NAME=` must stand

    @property
    def plain(self) -> bool:
        return not self.quoted and self.pattern is None


@dataclass(slots=True)
class Command:
    words: list[Word] = field(default_factory=list)
    assignments: int = 0  # how many of the first words are `NAME=value` assignments
    redirects: list[tuple[str, Word]] = field(default_factory=list)  # (op with fd, target)


@dataclass(slots=True)
class Script:
    commands: list[Command]
    operators: list[str]


def parse_static(text: str) -> Script:
    """The commands of `text`, or `NotStatic` with the first construct outside the subset."""
    return _Reader(text).script()


def expand(pattern: str, cwd: str) -> list[str] | None:
    """What bash makes of a glob word in `cwd`: the sorted matches, or None when it matches
    nothing (bash then passes the word as written). Raises `NotStatic` for patterns this
    cannot mirror exactly, or that match too much."""
    if "[:" in pattern or "[=" in pattern or "[." in pattern:
        raise NotStatic("a glob with a character class")
    parts = pattern.split("/")
    if pattern.startswith("/") or ".." in parts:
        raise NotStatic("a glob that reaches outside the work directory")
    if len(parts) > MAX_GLOB_DEPTH:
        raise NotStatic("a glob deeper than the judge expands")
    pattern = pattern.replace("[^", "[!")  # bash takes both for a negated set
    matches: list[str] = []
    for match in glob.iglob(pattern, root_dir=cwd):
        matches.append(match)
        if len(matches) > MAX_MATCHES:
            raise NotStatic(f"a glob that matches more than {MAX_MATCHES} files")
    return sorted(matches) or None


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> NotStatic:
        return NotStatic(what)

    def script(self) -> Script:
        commands: list[Command] = []
        operators: list[str] = []
        current = Command()
        words = 0
        while True:
            self.skip_blanks()
            self.skip_comment()
            if self.pos >= len(self.text):
                break
            op = self.operator()
            if op is not None:
                if current.words or current.redirects:
                    commands.append(current)
                    current = Command()
                    operators.append(op)
                    if len(commands) >= MAX_COMMANDS:
                        raise self.fail("more commands than are checked one by one")
                elif op != "\n":  # a newline after `&&` or `|` continues the command
                    raise self.fail(f"an operator {op!r} without a command before it")
                continue
            redirect = self.redirect(current)
            words += 1 if redirect else self.add_word(current, self.word())
            if words > MAX_WORDS:  # redirection targets count as words
                raise self.fail("more words than are checked one by one")
        if current.words or current.redirects:
            commands.append(current)
        elif operators and operators[-1] in ("\n", ";"):
            operators.pop()  # `ls;` and a final newline end the last command
        elif operators:
            raise self.fail(f"an operator {operators[-1]!r} without a command after it")
        return Script(commands, operators)

    def add_word(self, current: Command, word: Word) -> int:
        """Add `word` to the command being read; how many words that added."""
        if not current.words and word.plain and word.value in RESERVED:
            if word.value != "[[":
                raise self.fail(f"shell block syntax ({word.value!r})")
            current.words.append(word)
            self.conditional(current)
            return len(current.words)
        leading = len(current.words) == current.assignments
        if leading and ARRAY_WORD.match(word.lead if word.quoted else word.value):
            raise self.fail("an array assignment (its subscript is evaluated)")
        if leading and assignment_name(word):
            current.assignments += 1
        current.words.append(word)
        return 1

    def skip_blanks(self) -> None:
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in " \t":
                self.pos += 1
            elif self.text.startswith("\\\n", self.pos):
                self.pos += 2
            else:
                return

    def skip_comment(self) -> None:
        """`#` where a word would start comments out the rest of the line (as in bash)."""
        if self.text.startswith("#", self.pos):
            end = self.text.find("\n", self.pos)
            self.pos = len(self.text) if end < 0 else end

    def operator(self) -> str | None:
        rest = self.text[self.pos : self.pos + 2]
        if rest in ("|&", ";;", ";&"):
            raise self.fail(f"the operator {rest!r}")
        for op in OPERATORS:
            if rest.startswith(op):
                self.pos += len(op)
                return op
        if rest[:1] == "&" and rest != "&>":
            raise self.fail("a command run in the background ('&')")
        return None

    def redirect(self, command: Command) -> bool:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        op = next((op for op in REDIRECTS if self.text.startswith(op, self.pos)), None)
        if op is None:
            self.pos = start
            return False
        if op not in ALLOWED_REDIRECTS:
            raise self.fail(f"the redirection {op!r}")
        fd = self.text[start : self.pos]
        self.pos += len(op)
        self.skip_blanks()
        if self.pos >= len(self.text) or self.text[self.pos] in " \t\n;&|<>()":
            raise self.fail(f"a redirection {fd + op!r} without a target")
        target = self.word()
        if target.pattern is not None:
            raise self.fail("a redirection to a glob")
        command.redirects.append((fd + op, target))
        return True

    def conditional(self, command: Command) -> None:
        """`[[ ... ]]`: its words up to `]]`; `&&`, `||`, `<`, `>` are words of the test."""
        while True:
            self.skip_blanks()
            if self.pos >= len(self.text) or self.text[self.pos] == "\n":
                raise self.fail("'[[' without ']]' on its line")
            two = self.text[self.pos : self.pos + 2]
            if two in ("&&", "||"):
                command.words.append(Word(two))
                self.pos += 2
                continue
            if self.text[self.pos] in "<>":
                command.words.append(Word(self.text[self.pos]))
                self.pos += 1
                continue
            word = self.word()
            command.words.append(word)
            if word.plain and word.value == "]]":
                return

    def word(self) -> Word:
        built = _WordBuilder()
        start = self.pos
        text = self.text
        while self.pos < len(text) and text[self.pos] not in WORD_END:
            ch = text[self.pos]
            if ch in REFUSED_IN_WORDS:
                raise self.fail(REFUSED_IN_WORDS[ch])
            if ch < " " or ch == "\x7f":
                raise self.fail("a control character")
            if ch == "'":
                built.quoted(self.single_quoted())
            elif ch == '"':
                built.quoted(self.double_quoted())
            elif ch == "\\":
                self.escape(built)
            elif ch in "{}" or (ch == "~" and self.pos == start):
                if not self.at_lone_braces(start):
                    raise self.fail(
                        "a '~' (tilde expansion)"
                        if ch == "~"
                        else "braces (brace expansion or a command group)"
                    )
                built.plain("{}")  # find -exec ... {}: a literal word
                self.pos += 2
            elif plain := PLAIN_RUN.match(text, self.pos):
                built.plain(plain.group())  # a run of ordinary characters at once
                self.pos = plain.end()
            else:
                built.plain(ch)
                self.pos += 1
        if self.pos == start:
            raise self.fail(f"an unexpected {text[self.pos]!r}")
        return built.word()

    def at_lone_braces(self, start: int) -> bool:
        end = self.pos + 2
        return (
            self.pos == start
            and self.text[self.pos : end] == "{}"
            and (end >= len(self.text) or self.text[end] in WORD_END)
        )

    def single_quoted(self) -> str:
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            raise self.fail("an unterminated single quote")
        part = self.text[self.pos + 1 : end]
        if _has_control(part):
            raise self.fail("a control character")
        self.pos = end + 1
        return part

    def escape(self, built: _WordBuilder) -> None:
        if self.pos + 1 >= len(self.text):
            raise self.fail("a trailing backslash")
        nxt = self.text[self.pos + 1]
        self.pos += 2
        if nxt == "\n":
            return  # a line continuation
        if nxt < " ":
            raise self.fail("a control character")
        built.quoted(nxt)

    def double_quoted(self) -> str:
        """After `"`: only backslash escapes are allowed; `$` and backquotes are not static."""
        self.pos += 1
        parts: list[str] = []
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(parts)
            if ch in "$`":
                raise self.fail("an expansion or substitution inside double quotes")
            if (ch < " " and ch not in "\t\n") or ch == "\x7f":
                raise self.fail("a control character")
            if ch == "\\" and text[self.pos + 1 : self.pos + 2] in ('"', "\\", "\n", "$", "`"):
                if text[self.pos + 1] != "\n":
                    parts.append(text[self.pos + 1])
                self.pos += 2
                continue
            parts.append(ch)
            self.pos += 1
        raise self.fail("an unterminated double quote")


@dataclass(slots=True)
class _WordBuilder:
    """A word as it is read: its value, its glob pattern, and what of it was quoted."""

    value: list[str] = field(default_factory=list)
    pattern: list[str] = field(default_factory=list)
    lead: int = 0  # parts of `value` before the first quoting
    any_quoted: bool = False
    globbed: bool = False
    bracket: bool = False

    def quoted(self, text: str) -> None:
        if not self.any_quoted:
            self.lead = len(self.value)
        self.any_quoted = True
        self.value.append(text)
        self.pattern.append(glob.escape(text))

    def plain(self, text: str) -> None:
        """Unquoted text: one character of glob syntax, or a run of ordinary ones."""
        # `[` is a glob only when a `]` closes it: `[[` and `a[` are plain words.
        if text in ("*", "?") or (text == "]" and self.bracket):
            self.globbed = True
        self.bracket = self.bracket or text == "["
        self.value.append(text)
        self.pattern.append(text)

    def word(self) -> Word:
        lead = self.value[: self.lead] if self.any_quoted else self.value
        return Word(
            "".join(self.value),
            "".join(self.pattern) if self.globbed else None,
            self.any_quoted,
            "".join(lead),
        )


def _has_control(text: str) -> bool:
    return any((ch < " " and ch not in "\t\n") or ch == "\x7f" for ch in text)


def assignment_name(word: Word) -> str | None:
    """The variable a leading `NAME=value` word assigns, or None if it is not one."""
    if word.pattern is not None:
        return None
    match = ASSIGNMENT.match(word.lead if word.quoted else word.value)
    return match.group(0).rstrip("+=") if match else None
