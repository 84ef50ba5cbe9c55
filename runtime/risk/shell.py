"""A small bash parser: enough of bash's grammar to find every simple command in a command line.

The risk policy has to judge what bash would actually run, so this follows bash's rules for
quoting, comments, substitutions, redirections, heredocs and compound commands instead of
matching patterns on the raw text. What it does not understand is reported as an error,
which the policy treats as risky: it never has to guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NoReturn

METACHARS = frozenset(" \t\n;&|()<>")
# Characters with no meaning to the word reader (no quoting, expansion, glob or brace).
PLAIN_RUN = re.compile(r"[^ \t\n;&|()<>'\"\\$`*?\[{}]+")
QUOTING = frozenset("'\"\\$`")
# Longest first: the first operator that matches is the one bash reads.
REDIRECT_OPS = ("&>>", "<<<", "<<-", "&>", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">")
CONTROL_OPS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|")
CASE_OPS = frozenset({";;&", ";;", ";&"})
CONTROL_STARTS = frozenset(";&|")
REDIRECT_STARTS = frozenset("<>&{0123456789")  # what a redirection (or its fd) starts with
NEEDS_COMMAND_AFTER = frozenset({"&&", "||", "|", "|&"})
HEX_DIGITS = "0123456789abcdefABCDEF"
OCTAL_DIGITS = "01234567"
MAX_DEPTH = 64  # nested substitutions and groups; deeper is refused rather than recursed
ANSI_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
# Reserved words that open a block, and the block each one opens.
OPENERS = {"if": "if", "while": "loop", "until": "loop", "{": "{"}
CLOSERS = {"fi": "if", "done": "loop", "}": "{"}
MIDDLES = {"then": "if", "elif": "if", "else": "if", "do": "loop"}
# Reserved words that may directly follow a closed block: `{ ...; } }`, `if { ...; } then`.
FOLLOWERS = frozenset(CLOSERS) | frozenset(MIDDLES)

# What parse_command found, which decides what parse_list accepts next.
SIMPLE = "simple"  # a simple command: an operator, a newline or the end must follow
COMPOUND = "compound"  # a block or group just closed: a reserved word may also follow
PREFIX = "prefix"  # a reserved word like `if` or `!`: a command must follow


@dataclass(frozen=True, slots=True)
class Redirect:
    op: str  # as written, fd digits kept: ">", ">>", "2>", "2>&", "<<", "&>" ...
    target: str  # the word after the operator, quote-removed


@dataclass(frozen=True, slots=True)
class Segment:
    argv: tuple[str, ...]  # quote-removed words, leading VAR=value assignments removed
    redirects: tuple[Redirect, ...]
    # Extensions of the agreed API (with defaults, so they are optional):
    # the leading VAR=value words, which can change what the command runs (PATH=. ls);
    assignments: tuple[str, ...] = ()
    # and the indices of argv words that bash expands into words not known here: those with
    # a variable or substitution, or starting with a glob (`$x`, `*`). Any of them may turn
    # into an option (x=-delete; find . $x) or into several words.
    expandable: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class ShellAnalysis:
    segments: tuple[Segment, ...]  # every simple command, nested ones included, in source order
    operators: tuple[str, ...]  # control operators seen: ";", "&&", "||", "|", "|&", "&", "\n"
    substitutions: int  # $(...), `...`, <(...), >(...)
    subshells: int  # ( ... ) groups
    error: str | None = None  # why the command could not be parsed

    @property
    def is_simple(self) -> bool:
        """Exactly one plain command: no operators, redirects, substitutions or subshells."""
        return (
            self.error is None
            and len(self.segments) == 1
            and not self.operators
            and not self.segments[0].redirects
            and self.substitutions == 0
            and self.subshells == 0
        )


def parse_shell(command: str) -> ShellAnalysis:
    state = _State()
    error: str | None = None
    try:
        _Parser(command, state).parse_list(None)
    except ShellSyntaxError as exc:
        error = str(exc)
    except RecursionError:
        error = "the command is nested too deeply"
    return ShellAnalysis(
        segments=tuple(segment for segment in state.segments if segment is not None),
        operators=tuple(state.operators),
        substitutions=state.substitutions,
        subshells=state.subshells,
        error=error,
    )


class ShellSyntaxError(ValueError):
    pass


@dataclass(slots=True)
class _Word:
    value: str  # after quote removal
    raw: str  # as written
    quoted: bool  # any quoting at all: such a word is never a reserved word or fd number
    expandable: bool  # see Segment.expandable


@dataclass(slots=True)
class _Heredoc:
    delimiter: str
    strip_tabs: bool  # <<-
    expand: bool  # an unquoted delimiter: the body undergoes $(...) and `...`


@dataclass(slots=True)
class _State:
    """What every nested parser adds to: the result of the whole parse."""

    # A simple command reserves its slot when it starts, so nested commands found while
    # reading its words come after it: source order.
    segments: list[Segment | None] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)
    substitutions: int = 0
    subshells: int = 0
    depth: int = 0


class _Parser:
    def __init__(self, text: str, state: _State) -> None:
        self.text = text
        self.pos = 0
        self.state = state
        self.heredocs: list[_Heredoc] = []
        self.expanded = False  # whether the word being read has an expansion so far

    # -- characters --------------------------------------------------------------------------

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def at(self, literal: str) -> bool:
        return self.text.startswith(literal, self.pos)

    def fail(self, message: str) -> NoReturn:
        raise ShellSyntaxError(message)

    @contextmanager
    def nested(self) -> Iterator[None]:
        self.state.depth += 1
        if self.state.depth > MAX_DEPTH:
            self.fail("the command is nested too deeply")
        try:
            yield
        finally:
            self.state.depth -= 1

    def skip_blanks(self) -> None:
        """Spaces, tabs, line continuations, and a comment: `#` where a word would start."""
        while True:
            ch = self.peek()
            if ch in (" ", "\t"):
                self.pos += 1
            elif ch == "\\" and self.peek(1) == "\n":
                self.pos += 2
            elif ch == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end  # the newline still ends the command
            else:
                return

    def at_word_end(self) -> bool:
        ch = self.peek()
        return ch == "" or ch in METACHARS

    def peek_plain_word(self) -> str | None:
        """The next word if it is written without any quoting or expansion, else None:
        only such a word can be a reserved word."""
        end = self.pos
        while end < len(self.text) and self.text[end] not in METACHARS:
            if self.text[end] in QUOTING:
                return None
            end += 1
        if end < len(self.text) and self.text[end] in "<>" and self.text[end + 1 : end + 2] == "(":
            return None  # a process substitution continues the word
        return self.text[self.pos : end] or None

    # -- lists and commands --------------------------------------------------------------------

    def parse_list(self, closer: str | None) -> None:
        """Commands joined by control operators, up to `closer` (left unread) or the end."""
        blocks: list[str] = []  # open if/loop/brace blocks, to check they are all closed
        last: str | None = None  # what the previous command was; None after an operator
        pending: str | None = None  # an operator or reserved word that needs a command next
        newline = False  # a newline separated the previous command from the next one
        while True:
            self.skip_blanks()
            ch = self.peek()
            if ch in ("", closer):
                break
            if ch == ")":
                self.fail("unexpected ')'")
            if ch == "\n":
                self.pos += 1
                self.read_heredocs()
                if last is not None:
                    newline, last = True, None
                continue
            op = self.read_control_operator()
            if op is not None:
                if last is None:
                    self.fail(f"unexpected {op!r}")
                self.state.operators.append(op)
                newline, last = False, None
                pending = op if op in NEEDS_COMMAND_AFTER else None
                continue
            if last == SIMPLE or (last == COMPOUND and self.peek_plain_word() not in FOLLOWERS):
                self.fail(f"unexpected text after a command at {self.text[self.pos :][:20]!r}")
            if newline:
                self.state.operators.append("\n")
                newline = False
            word = self.peek_plain_word()
            kind = self.parse_command(blocks)
            last = None if kind == PREFIX else kind
            pending = word if kind == PREFIX else None
        if closer is not None and self.peek() != closer:
            self.fail(f"missing {closer!r}")
        if pending is not None:
            self.fail(f"a command must follow {pending!r}")
        if blocks:
            self.fail(f"{blocks[-1]!r} block is never closed")

    def read_control_operator(self) -> str | None:
        if self.peek() not in CONTROL_STARTS or self.at("&>"):
            return None  # `&>` is a redirection that starts a command
        for op in CONTROL_OPS:
            if self.at(op):
                if op in CASE_OPS:
                    self.fail(f"unexpected {op!r}")
                self.pos += len(op)
                return op
        return None

    def parse_command(self, blocks: list[str]) -> str:
        if self.peek() == "(":
            return self.parse_parenthesized()
        word = self.peek_plain_word()
        if word is not None:
            kind = self.parse_reserved(word, blocks)
            if kind is not None:
                return kind
        return self.parse_simple()

    def parse_parenthesized(self) -> str:
        """`(( arithmetic ))` or a `( subshell )`, with the redirections that follow it."""
        if self.at("((") and self.arithmetic_closes(self.pos):
            self.pos += 2
            self.scan_arithmetic()
        else:
            self.pos += 1
            self.state.subshells += 1
            with self.nested():
                self.parse_list(")")
            self.pos += 1
        self.parse_trailing_redirects()
        return COMPOUND

    def parse_reserved(self, word: str, blocks: list[str]) -> str | None:
        """Handle a reserved word at the start of a command; None if `word` is not one."""
        if word in OPENERS or word == "!":
            self.pos += len(word)
            if word in OPENERS:
                blocks.append(OPENERS[word])
            return PREFIX
        if word in MIDDLES or word in CLOSERS:
            block = MIDDLES.get(word) or CLOSERS[word]
            if not blocks or blocks[-1] != block:
                self.fail(f"unexpected {word!r}")
            self.pos += len(word)
            if word in MIDDLES:
                return PREFIX
            blocks.pop()
            self.parse_trailing_redirects()
            return COMPOUND
        if word in ("for", "select"):
            self.parse_for_header(word)
            blocks.append("loop")
            return PREFIX
        if word == "function":
            self.parse_function_header()
            return PREFIX
        if word == "[[":
            return self.parse_conditional()
        if word in ("case", "coproc"):
            self.fail(f"{word!r} is not supported")
        if word == "esac":
            self.fail(f"unexpected {word!r}")
        return None

    def parse_simple(self) -> str:
        slot = len(self.state.segments)
        self.state.segments.append(None)
        argv: list[str] = []
        redirects: list[Redirect] = []
        assignments: list[str] = []
        expandable: set[int] = set()
        while True:
            self.skip_blanks()
            ch = self.peek()
            if ch == "" or ch in "\n;|)" or (ch == "&" and self.peek(1) != ">"):
                break
            if ch == "(":
                if len(argv) == 1 and not redirects and not assignments and self.function_parens():
                    return PREFIX  # `name ()`: the function body follows; it is not run here
                self.fail("unexpected '('")
            redirect = self.try_redirect()
            if redirect is not None:
                redirects.append(redirect)
                continue
            word = self.read_word()
            if not argv and _is_assignment(word.raw):
                array = self.read_array() if word.raw.endswith("=") and self.at("(") else ""
                assignments.append(word.value + array)
            else:
                if word.expandable:
                    expandable.add(len(argv))
                argv.append(word.value)
        if argv or redirects or assignments:
            segment = Segment(
                tuple(argv), tuple(redirects), tuple(assignments), frozenset(expandable)
            )
            self.state.segments[slot] = segment
        return SIMPLE

    def read_array(self) -> str:
        """`NAME=(words)`: the words of an array assignment, read for their substitutions."""
        start = self.pos
        self.pos += 1
        while True:
            self.skip_blanks()
            ch = self.peek()
            if ch == ")":
                self.pos += 1
                return self.text[start : self.pos]
            if ch == "\n":
                self.pos += 1
            elif ch == "" or (ch in METACHARS and not self.at("<(") and not self.at(">(")):
                self.fail("unterminated array assignment")
            else:
                self.read_word()

    def function_parens(self) -> bool:
        """At `(`: consume `( )` if that is what follows."""
        end = self.pos + 1
        while self.text[end : end + 1] in (" ", "\t"):
            end += 1
        if self.text[end : end + 1] != ")":
            return False
        self.pos = end + 1
        return True

    def parse_function_header(self) -> None:
        self.pos += len("function")
        self.skip_blanks()
        if self.at_word_end():
            self.fail("a function name must follow 'function'")
        self.read_word()
        self.skip_blanks()
        if self.peek() == "(" and not self.function_parens():
            self.fail("unexpected '(' after the function name")

    def parse_for_header(self, keyword: str) -> None:
        """`for NAME [in WORDS]` or `for (( ... ))`, up to and including its separator.
        The words are read for their substitutions; they are not a command."""
        self.pos += len(keyword)
        self.skip_blanks()
        if self.at("(("):
            self.pos += 2
            self.scan_arithmetic()
        else:
            if self.at_word_end() or not self.read_word().raw.isidentifier():
                self.fail(f"a variable name must follow {keyword!r}")
            self.skip_blanks()
            if self.peek_plain_word() == "in":
                self.pos += 2
                self.skip_blanks()
                while not self.at_word_end():
                    self.read_word()
                    self.skip_blanks()
        self.skip_blanks()
        if self.peek() == ";" and not self.at(";;"):
            self.pos += 1
        elif self.peek() == "\n":
            self.pos += 1
            self.read_heredocs()

    def parse_conditional(self) -> str:
        """`[[ ... ]]`: inside it `&&`, `<`, `(` are words of the test, not shell syntax."""
        slot = len(self.state.segments)
        self.state.segments.append(None)
        self.pos += 2
        argv = ["[["]
        while True:
            self.skip_blanks()
            ch = self.peek()
            if ch == "":
                self.fail("'[[' is never closed")
            if ch == "\n":
                self.pos += 1
                continue
            if self.peek_plain_word() == "]]":
                self.pos += 2
                argv.append("]]")
                break
            if ch in "&|" or (ch in "<>()" and not self.at("<(") and not self.at(">(")):
                width = 2 if ch in "&|" and self.peek(1) == ch else 1
                argv.append(self.text[self.pos : self.pos + width])
                self.pos += width
            elif ch == ";":
                self.fail("unexpected ';' inside '[['")
            else:
                argv.append(self.read_word().value)
        redirects = self.read_redirects()
        self.state.segments[slot] = Segment(tuple(argv), tuple(redirects))
        return COMPOUND

    # -- redirections and heredocs -------------------------------------------------------------

    def parse_trailing_redirects(self) -> None:
        """Redirections after a group or block apply to all of it: record them as a segment
        of their own, with no words."""
        redirects = self.read_redirects()
        if redirects:
            self.state.segments.append(Segment((), tuple(redirects)))

    def read_redirects(self) -> list[Redirect]:
        redirects: list[Redirect] = []
        while True:
            self.skip_blanks()
            redirect = self.try_redirect()
            if redirect is None:
                return redirects
            redirects.append(redirect)

    def fd_prefix_length(self) -> int:
        """Length of an fd number (`2>`) or fd variable (`{fd}>`) before a redirection."""
        end = self.pos
        while end < len(self.text) and self.text[end] in "0123456789":
            end += 1
        if end == self.pos and self.peek() == "{":
            close = self.text.find("}", self.pos)
            name = self.text[self.pos + 1 : close] if close > 0 else ""
            end = close + 1 if name.isidentifier() and name.isascii() else self.pos
        if end > self.pos and self.text[end : end + 1] in ("<", ">"):
            return end - self.pos
        return 0

    def try_redirect(self) -> Redirect | None:
        if self.peek() not in REDIRECT_STARTS:
            return None
        fd_length = self.fd_prefix_length()
        start = self.pos + fd_length
        op = next((op for op in REDIRECT_OPS if self.text.startswith(op, start)), None)
        if op is None or (fd_length and op.startswith("&")):
            return None
        if op in ("<", ">") and self.text[start + 1 : start + 2] == "(":
            return None  # <(...) and >(...) are process substitutions: words
        fd = self.text[self.pos : start]
        self.pos = start + len(op)
        self.skip_blanks()
        if self.at_word_end() and not (self.at("<(") or self.at(">(")):
            self.fail(f"a target must follow {fd + op!r}")
        target = self.read_word()
        if op in ("<<", "<<-"):
            self.heredocs.append(_Heredoc(target.value, op == "<<-", expand=not target.quoted))
        return Redirect(fd + op, target.value)

    def read_heredocs(self) -> None:
        """After a newline: the bodies of the heredocs started on the line just ended.
        An unquoted delimiter means the body is expanded, so its substitutions run."""
        pending, self.heredocs = self.heredocs, []
        for doc in pending:
            lines: list[str] = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                line = self.text[self.pos : end]
                self.pos = min(end + 1, len(self.text))
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                lines.append(line)
            if doc.expand:
                body = _Parser("\n".join(lines), self.state)
                body.read_quoted_text(terminator=None)

    # -- words -------------------------------------------------------------------------------

    def read_word(self) -> _Word:
        start = self.pos
        parts: list[str] = []
        quoted = False
        prefix = False  # literal text came before: a glob here cannot start the word
        # Words read inside a substitution of this word restore the flag when they finish.
        outer, self.expanded = self.expanded, False
        while not self.at_word_end() or self.at("<(") or self.at(">("):
            ch = self.peek()
            if ch in "<>":
                parts.append(self.read_process_substitution())
            elif ch == "'":
                quoted = True
                parts.append(self.read_single_quoted())
            elif ch == '"':
                quoted = True
                self.pos += 1
                parts.append(self.read_quoted_text(terminator='"'))
            elif ch == "\\":
                quoted = True
                parts.append(self.read_escape())
            elif ch == "$":
                quoted = quoted or self.peek(1) in ("'", '"')
                parts.append(self.read_dollar(in_quotes=False))
            elif ch == "`":
                parts.append(self.read_backquoted(in_quotes=False))
            elif plain := PLAIN_RUN.match(self.text, self.pos):
                parts.append(plain.group())  # a run of ordinary characters at once
                self.pos = plain.end()
            else:
                # A glob or brace before any literal text may become `-delete` (`{}` stays).
                if not self.expanded and not prefix and self.glob_starts(ch):
                    self.expanded = True
                parts.append(ch)
                self.pos += 1
            prefix = prefix or any(parts[-1:])
        if self.pos == start:
            self.fail(f"unexpected {self.peek()!r}")
        expandable, self.expanded = self.expanded, outer
        return _Word("".join(parts), self.text[start : self.pos], quoted, expandable)

    def glob_starts(self, ch: str) -> bool:
        """Whether `ch` starts a glob or brace expansion; a lone `[` or `{}` is literal."""
        if ch in "*?":
            return True
        if ch == "{":
            return self.peek(1) != "}"
        if ch != "[":
            return False
        end = self.pos + 1
        while end < len(self.text) and self.text[end] not in METACHARS:
            if self.text[end] == "]":
                return True
            end += 1
        return False

    def read_escape(self) -> str:
        nxt = self.peek(1)
        self.pos += 2
        if nxt == "\n":
            return ""  # a line continuation
        return nxt or "\\"

    def read_single_quoted(self) -> str:
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            self.fail("unterminated single quote")
        value = self.text[self.pos + 1 : end]
        self.pos = end + 1
        return value

    def read_quoted_text(self, terminator: str | None) -> str:
        """Double-quoted text after its opening quote (or a heredoc body, up to the end):
        only `$`, backquotes and backslash are special."""
        parts: list[str] = []
        while True:
            ch = self.peek()
            if ch == "":
                if terminator is None:
                    return "".join(parts)
                self.fail("unterminated double quote")
            if ch == terminator:
                self.pos += 1
                return "".join(parts)
            if ch == "\\" and self.peek(1) in ("$", "`", '"', "\\", "\n"):
                parts.append(self.read_escape())
            elif ch == "$":
                parts.append(self.read_dollar(in_quotes=True))
            elif ch == "`":
                parts.append(self.read_backquoted(in_quotes=True))
            else:
                parts.append(ch)
                self.pos += 1

    def read_dollar(self, in_quotes: bool) -> str:
        """At `$`: a substitution or expansion keeps its raw text (it is not a literal)."""
        start = self.pos
        nxt = self.peek(1)
        if nxt == "(" and self.peek(2) == "(" and self.arithmetic_closes(self.pos + 1):
            self.pos += 3
            self.scan_arithmetic()
        elif nxt == "(":
            self.pos += 2
            self.state.substitutions += 1
            with self.nested():
                self.parse_list(")")
            self.pos += 1
        elif nxt == "{":
            self.pos += 2
            self.scan_braced(in_quotes)
        elif nxt == "'" and not in_quotes:
            return self.read_ansi_c()
        elif nxt == '"' and not in_quotes:
            self.pos += 2
            return self.read_quoted_text(terminator='"')
        else:
            self.pos += 1
        self.expanded = True
        return self.text[start : self.pos]

    def read_backquoted(self, in_quotes: bool) -> str:
        """`...`: the old command substitution; its body is parsed once unescaped."""
        start = self.pos
        self.pos += 1
        escapable = '$`\\"' if in_quotes else "$`\\"
        body: list[str] = []
        while True:
            ch = self.peek()
            if ch == "":
                self.fail("unterminated backquote")
            if ch == "`":
                self.pos += 1
                break
            if ch == "\\" and self.peek(1) and self.peek(1) in escapable:
                body.append(self.peek(1))
                self.pos += 2
            else:
                body.append(ch)
                self.pos += 1
        self.state.substitutions += 1
        with self.nested():
            _Parser("".join(body), self.state).parse_list(None)
        self.expanded = True
        return self.text[start : self.pos]

    def read_process_substitution(self) -> str:
        start = self.pos
        self.pos += 2
        self.state.substitutions += 1
        with self.nested():
            self.parse_list(")")
        self.pos += 1
        return self.text[start : self.pos]

    def scan_braced(self, in_quotes: bool) -> None:
        """The rest of a `${...}` expansion, whose operands may hold substitutions."""
        while True:
            ch = self.peek()
            if ch == "":
                self.fail("unterminated '${'")
            if ch == "}":
                self.pos += 1
                return
            if ch == "\\":
                self.pos += 2
            elif ch == "'" and not in_quotes:
                self.read_single_quoted()
            elif ch == '"':
                self.pos += 1
                self.read_quoted_text(terminator='"')
            elif ch == "$":
                self.read_dollar(in_quotes)
            elif ch == "`":
                self.read_backquoted(in_quotes)
            else:
                self.pos += 1

    def arithmetic_closes(self, start: int) -> bool:
        """Whether the `((` at `start` is closed by `))` (arithmetic) rather than by two
        separate parentheses (nested subshells), as bash decides."""
        depth = 0
        for index in range(start + 2, len(self.text)):
            ch = self.text[index]
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    return self.text[index + 1 : index + 2] == ")"
                depth -= 1
        return False

    def scan_arithmetic(self) -> None:
        """The rest of `(( ... ))` after the opening parentheses; substitutions inside run."""
        depth = 0
        while True:
            ch = self.peek()
            if ch == "":
                self.fail("unterminated arithmetic '(('")
            if ch == ")" and depth == 0:
                if self.peek(1) != ")":
                    self.fail("unbalanced parentheses in arithmetic")
                self.pos += 2
                return
            if ch in "()":
                depth += 1 if ch == "(" else -1
                self.pos += 1
            elif ch == "$":
                self.read_dollar(in_quotes=True)
            elif ch == "`":
                self.read_backquoted(in_quotes=False)
            elif ch == '"':
                self.pos += 1
                self.read_quoted_text(terminator='"')
            else:
                self.pos += 2 if ch == "\\" else 1

    def read_ansi_c(self) -> str:
        """$'...': decoded, so $'\\x72m' is seen as the `rm` bash will run."""
        self.pos += 2
        parts: list[str] = []
        while True:
            ch = self.peek()
            if ch == "":
                self.fail("unterminated $'...'")
            if ch == "'":
                self.pos += 1
                return "".join(parts)
            if ch == "\\":
                parts.append(self.read_ansi_escape())
            else:
                parts.append(ch)
                self.pos += 1

    def read_ansi_escape(self) -> str:
        nxt = self.peek(1)
        if nxt in ANSI_ESCAPES:
            self.pos += 2
            return ANSI_ESCAPES[nxt]
        if nxt == "c" and self.peek(2):
            self.pos += 3
            return chr(ord(self.text[self.pos - 1]) & 0x1F)
        if nxt in ("x", "u", "U"):
            digits, limit, start, base = HEX_DIGITS, {"x": 2, "u": 4, "U": 8}[nxt], self.pos + 2, 16
        elif nxt and nxt in OCTAL_DIGITS:
            digits, limit, start, base = OCTAL_DIGITS, 3, self.pos + 1, 8
        else:
            self.pos += 1
            return "\\"
        end = start
        while end < min(len(self.text), start + limit) and self.text[end] in digits:
            end += 1
        self.pos = end
        if end == start:
            return "\\" + nxt
        try:
            return chr(int(self.text[start:end], base))
        except (ValueError, OverflowError):
            return "\ufffd"


def _is_assignment(raw: str) -> bool:
    """`NAME=value`, `NAME+=value` or `NAME[index]=value`, with the name unquoted."""
    name, equals, _ = raw.partition("=")
    if not equals:
        return False
    name = name.removesuffix("+")
    if name.endswith("]") and "[" in name:
        name = name[: name.index("[")]
    return name.isidentifier() and name.isascii()
