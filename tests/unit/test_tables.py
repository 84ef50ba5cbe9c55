"""Operator tables: plain columns for pipes, fitted to the terminal's width in one; every
cell as text, hidden characters escaped."""

from __future__ import annotations

import io

from bot.tables import hanging, print_table

COLUMNS = ("ID", "STATUS", "ARGUMENTS")
ROWS = [("k3x9q2m7vd4pw", "pending", "rm -rf build/cache " * 8)]


def test_piped_tables_are_plain_columns_with_the_last_one_whole() -> None:
    out = io.StringIO()
    print_table(COLUMNS, ROWS, out)
    head, row = out.getvalue().splitlines()
    assert head.split() == ["ID", "STATUS", "ARGUMENTS"]
    assert row.startswith("k3x9q2m7vd4pw  pending  rm -rf build/cache")
    assert row.endswith(ROWS[0][2])  # never cut: scripts read it


def test_in_a_terminal_the_last_column_folds_within_the_width() -> None:
    out = io.StringIO()
    print_table(COLUMNS, ROWS, out, width=60)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 60 for line in lines), lines
    assert len(lines) > 2  # the arguments folded onto more lines
    assert lines[1].startswith("k3x9q2m7vd4pw")
    assert "".join(line[lines[0].index("ARGUMENTS") :] for line in lines[1:]).replace(
        " ", ""
    ) == ROWS[0][2].replace(" ", "")  # every character shown, under its column


def test_audit_details_wrap_under_their_column() -> None:
    head = "2026-12-01 14:05:00  approval_decided"
    rest = "approval=k3x9q2m7vd4pw decision=approved " * 4
    assert hanging(head, rest, None) == f"{head}  {rest}".rstrip()  # piped: one line
    lines = hanging(head, rest, 90).splitlines()
    assert all(len(line) <= 90 for line in lines) and len(lines) > 1
    assert all(line.startswith(" " * (len(head) + 2)) for line in lines[1:])
    narrow = hanging(head, rest, 50).splitlines()  # too little room beside: below, indented
    assert narrow[0] == head and all(line.startswith("    ") for line in narrow[1:])


def test_cells_are_text_with_hidden_characters_escaped() -> None:
    row = ["mysql -p[redacted] [bold]x[/bold] \u202eevil\u200b"]
    for width in (None, 80):  # piped, and rich in a terminal (no markup read from cells)
        out = io.StringIO()
        print_table(["ARGUMENTS"], [row], out, width)
        assert "mysql -p[redacted] [bold]x[/bold] \\u202eevil\\u200b" in out.getvalue()
    assert hanging("at", "x\u2066y", None) == "at  x\\u2066y"
