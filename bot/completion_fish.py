"""`clawgate completion fish`: fish's completion script, made from the command line's argparse
parser as shtab makes bash's, zsh's and tcsh's (shtab has no fish).

fish completes a word from conditions on what is typed before it. Each subcommand's options
and choices are offered where the words typed so far (options left out) begin with its
path, like `approvals show`; its own subcommands where they are exactly that path."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

HELPERS = """function __{prog}_typed --description 'the words after {prog} so far, options left out'
    set -l words (commandline -opc)
    string match -v -- '-*' $words[2..-1]
end
function __{prog}_at --description 'whether the words typed are exactly these'
    set -l typed (__{prog}_typed)
    test "$typed" = "$argv"
end
function __{prog}_under --description 'whether the words typed begin with these'
    set -l typed (__{prog}_typed)
    test "$typed" = "$argv"; or string match -q -- "$argv *" "$typed"
end
"""


def fish_script(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    lines = [HELPERS.format(prog=prog).rstrip("\n"), f"complete -c {prog} -f"]
    lines += _lines(parser, prog, [])
    return "\n".join(lines) + "\n"


def _lines(parser: argparse.ArgumentParser, prog: str, path: list[str]) -> Iterator[str]:
    at = " ".join([f"__{prog}_at", *path])
    # The top level's options go before a command only.
    under = " ".join([f"__{prog}_under", *path]) if path else at
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                said = _quoted(helps.get(name, ""))
                yield f"complete -c {prog} -n {_quoted(at)} -a {name} -d {said}"
                yield from _lines(sub, prog, [*path, name])
        elif action.option_strings:
            yield _option(prog, under, action)
        elif action.choices:
            words = " ".join(map(str, action.choices))
            yield f"complete -c {prog} -n {_quoted(at)} -a {_quoted(words)}"


def _option(prog: str, condition: str, action: argparse.Action) -> str:
    parts = [f"complete -c {prog} -n {_quoted(condition)}"]
    for flag in action.option_strings:
        parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
    if action.choices:
        parts.append(f"-x -a {_quoted(' '.join(map(str, action.choices)))}")
    elif action.nargs != 0:
        parts.append("-r")  # takes a value
    if action.help and action.help != argparse.SUPPRESS:
        parts.append(f"-d {_quoted(action.help.split(' (', 1)[0])}")
    return " ".join(parts)


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
