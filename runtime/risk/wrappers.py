"""The bash judge's wrappers: programs that run another program (`env`, `nohup`, `time`,
`nice`, `timeout`, `stdbuf`, `ionice`, `command`, `exec`, `xargs`, `sudo`). Each returns the
command it runs, for the judge to judge in turn; options it does not understand ask."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.risk.shell import parse_shell
from runtime.risk.tables import (
    ENV_FLAGS,
    ENV_VALUED,
    EXEC_FLAGS,
    IONICE_FLAGS,
    IONICE_VALUED,
    NICE_VALUED,
    STDBUF_VALUED,
    SUDO_FLAGS,
    SUDO_VALUED,
    TIME_FLAGS,
    TIME_VALUED,
    TIMEOUT_FLAGS,
    TIMEOUT_VALUED,
    XARGS_LONG_FLAGS,
    XARGS_LONG_VALUED,
)
from runtime.risk.words import (
    Expanding,
    basename,
    is_assignment_word,
    option_skip,
    xargs_option_width,
    xargs_replace_string,
)


class WrapperRules:
    """Mixed into the bash judge (runtime.risk.bash), whose findings it adds to."""

    def ask(self, reason: str) -> None:
        raise NotImplementedError

    def assignment(self, assignment: str, prefix: bool = False) -> None:
        raise NotImplementedError

    def wrapper_arguments(self, wrapper: str, words: Sequence[str]) -> None:
        """A wrapper's own arguments must be known: `timeout $t ls` could split into
        `timeout 5 rm -rf x ls`."""
        for word in words:
            if isinstance(word, Expanding):
                self.ask(f"{basename(wrapper)} argument {word} may expand to other words")

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
            skip = option_skip(arg, ENV_FLAGS, ENV_VALUED)
            if skip is None:
                break
            if arg.startswith(("-C", "--ch")):
                self.ask(f"env {arg} runs the command in another directory")
            if skip < 0:
                self.ask(f"env option {arg} is not understood")
                skip = 1
            index += skip
        while index < len(argv) and is_assignment_word(argv[index]):
            self.assignment(argv[index], prefix=True)
            index += 1
        return argv[index:]

    def _env_split(self, text: str, rest: list[str]) -> list[str]:
        """env -S 'words': env splits the string into the command's first words, with its own
        assignments and `${VAR}` expansion, which the words alone would not show."""
        if isinstance(text, Expanding):
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
            skip = option_skip(arg, TIME_FLAGS, TIME_VALUED)
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
            skip = option_skip(arg, frozenset(), NICE_VALUED)
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
        """xargs appends its input to the command it runs: judge that command, and ask, for
        the words it adds are file names (or options) the judge cannot see (`ls | xargs cat`
        reads whatever `ls` of a link-planted directory or a list file names)."""
        self.ask("xargs takes file names from its input, which the judge cannot see")
        index = 1
        while index < len(argv) and argv[index].startswith("-") and argv[index] != "-":
            arg = argv[index]
            if arg == "--":
                index += 1
                break
            name = arg.partition("=")[0]
            if arg.startswith("--") and name not in XARGS_LONG_VALUED | XARGS_LONG_FLAGS:
                self.ask(f"xargs option {arg} is not understood (abbreviations ask)")
            index += xargs_option_width(arg, has_next=index + 1 < len(argv))
        self.wrapper_arguments(argv[0], argv[1:index])
        replace = xargs_replace_string(argv[1:index])
        inner = argv[index:] or ["echo"]
        if replace is None:
            return [*inner, Expanding("the input of xargs")]  # appended to the command
        return [Expanding(word) if replace in word else word for word in inner]

    def _sudo(self, argv: list[str]) -> list[str]:
        program = basename(argv[0])
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
            skip = option_skip(arg, flags, valued)
            if skip is None or skip < 0:
                self.ask(f"{program} option {arg} is not understood")
                skip = 1
            index += skip
        return argv[index:]
