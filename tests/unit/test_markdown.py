"""The Markdown-aware splitter and the rendering steps every chat shares: pieces never end
inside a code block or a table, say all the answer said, and links show where they go."""

from __future__ import annotations

import json
import re

import pytest

from adapters.feishu.answers import answer_card
from adapters.feishu.answers import answer_pieces as feishu_pieces
from adapters.long_answer import as_file
from adapters.markdown import (
    beginning,
    fitted,
    honest_links,
    outside_code,
    segments,
    split_markdown,
)
from adapters.slack.answers import answer_message
from adapters.slack.answers import answer_pieces as slack_pieces

CODE = "\n".join(f"    result_{i} = compute({i})  # step {i}" for i in range(400))
ANSWER = (
    "## Why the build failed\n\n"
    "The **deploy** step could not reach the registry; see [the runbook](https://wiki.example.com/runbook).\n\n"
    "- retry the job\n- check the token\n\n"
    "| step | status |\n|------|--------|\n| build | ok |\n| deploy | failed |\n\n"
    f"```python\ndef run():\n{CODE}\n```\n\n"
    "That is all."
)


def fences_balanced(piece: str) -> bool:
    return len(re.findall(r"^\s*```", piece, re.MULTILINE)) % 2 == 0


def code_lines(pieces: list[str]) -> list[str]:
    """The lines inside code blocks, in order, over all pieces."""
    lines: list[str] = []
    for piece in pieces:
        inside = False
        for line in piece.split("\n"):
            if line.lstrip().startswith("```"):
                inside = not inside
            elif inside:
                lines.append(line)
    return lines


@pytest.mark.parametrize("limit", [500, 2000, 9000])
def test_a_long_code_block_is_closed_and_reopened_never_split_open(limit: int) -> None:
    pieces = split_markdown(ANSWER, limit)
    assert len(pieces) > 1
    assert all(len(piece) <= limit for piece in pieces)
    assert all(fences_balanced(piece) for piece in pieces), pieces
    assert code_lines(pieces) == code_lines([ANSWER])  # every line, once, in order
    continued = [p for p in pieces if p.startswith("```python")]
    assert len(continued) >= 2  # the language is kept where the block goes on
    assert pieces[0].startswith("## Why the build failed")
    assert pieces[-1].endswith("That is all.")


def test_a_table_is_never_cut_and_a_long_one_repeats_its_header() -> None:
    rows = "\n".join(f"| host-{i:03d} | {'up' if i % 3 else 'down'} |" for i in range(200))
    text = f"Hosts:\n\n| host | state |\n|---|---|\n{rows}\n\nDone."
    pieces = split_markdown(text, 1000)
    tables = [p for p in pieces if "| host-" in p]
    assert len(tables) > 2
    for piece in tables:  # each piece that holds rows has the header just above them
        assert "| host | state |\n|---|---|\n| host-" in piece
    shown = [line for p in pieces for line in p.split("\n") if line.startswith("| host-")]
    assert shown == rows.split("\n")


def test_pieces_are_cut_between_paragraphs_and_keep_every_word() -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 40 for i in range(30)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    pieces = split_markdown(text, 900)
    assert all(len(p) <= 900 for p in pieces)
    for piece in pieces:
        assert piece.startswith("Paragraph ") and piece.endswith("word")
    assert "\n\n".join(pieces) == text


def test_a_short_answer_is_one_piece_as_written() -> None:
    text = "# Title\n\nBody with `code` and a list:\n\n1. one\n2. two\n"
    assert split_markdown(text, 4000) == [text.rstrip("\n")]


def test_what_opens_a_code_block_and_what_does_not() -> None:
    kinds = [seg.kind for seg in segments("```x``` is a code span\n\n~~~\nsays ```\n~~~\nafter")]
    assert kinds == ["text", "fence", "text"]
    (piece,) = split_markdown("```sh\nno closing fence", 100)
    assert piece == "```sh\nno closing fence"  # short: as written
    assert all(fences_balanced(p) for p in split_markdown("```sh\n" + "echo hi\n" * 50, 100))


def test_a_piece_holds_at_most_so_many_tables() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |"
    text = "\n\n".join([table] * 7)
    pieces = split_markdown(text, 10_000, max_tables=3)
    assert [p.count("| a | b |") for p in pieces] == [3, 3, 1]


def test_fitted_splits_finer_while_the_rendered_piece_does_not_fit() -> None:
    text = "\n\n".join(["<" * 300] * 20)  # escaping `<` as `&lt;` makes each 4 times longer
    pieces = fitted(text, 4000, lambda p: len(p.replace("<", "&lt;")) <= 4000)
    assert all(len(p.replace("<", "&lt;")) <= 4000 for p in pieces)
    assert "\n\n".join(pieces) == text


def test_links_show_the_host_they_go_to_outside_code() -> None:
    text = (
        "See [the docs](https://evil.example/login?next=/) and [github.com/org](https://github.com/org)"
        " and [www.python.org](https://www.python.org/).\n\n"
        "```md\n[the docs](https://evil.example/)\n```"
    )
    shown = honest_links(text)
    assert "[the docs (evil.example)](https://evil.example/login?next=/)" in shown
    assert "[github.com/org](https://github.com/org)" in shown  # names its host already
    assert "[www.python.org](https://www.python.org/)" in shown
    assert shown.endswith("```md\n[the docs](https://evil.example/)\n```")  # code as written
    masked = honest_links("[repo](https://[redacted]@github.com/org/repo)")  # no IPv6 host
    assert masked == "[repo (github.com)](https://[redacted]@github.com/org/repo)"


@pytest.mark.parametrize(
    ("link", "shown"),
    [
        ("[docs](HTTPS://evil.example/x)", "[docs (evil.example)](HTTPS://evil.example/x)"),
        ("[docs](https://evil.example/x 't')", "[docs (evil.example)](https://evil.example/x 't')"),
        ("[docs](https://evil.example/x (t))", "[docs (evil.example)](https://evil.example/x (t))"),
        ("[docs](https://evil.example/a(b)c)", "[docs (evil.example)](https://evil.example/a(b)c)"),
        # The host as a path part of another host is not the host shown.
        (
            "[https://github.com/a.co](https://a.co/x)",
            "[https://github.com/a.co (a.co)](https://a.co/x)",
        ),
        ("[see a.co](https://a.co/x)", "[see a.co](https://a.co/x)"),
        (
            "[docs][1] and [evil.example][]\n\n[1]: https://evil.example/x\n"
            "[evil.example]: https://evil.example/",
            "[docs (evil.example)](https://evil.example/x) and [evil.example](https://evil.example/)"
            "\n\n[1]: https://evil.example/x\n[evil.example]: https://evil.example/",
        ),
    ],
)
def test_no_link_form_hides_its_host(link: str, shown: str) -> None:
    assert honest_links(link) == shown


def test_a_transform_reaches_everything_but_code() -> None:
    text = "\n\na <b> `x<y`\n\n```html\n<at id=all></at>\n```\n\n<at id=all></at>\n"
    escaped = outside_code(text, lambda part: part.replace("<", "&lt;"))
    assert escaped == (
        "\n\na &lt;b> `x<y`\n\n```html\n<at id=all></at>\n```\n\n&lt;at id=all>&lt;/at>\n"
    )
    assert outside_code(ANSWER, lambda part: part) == ANSWER


def test_beginning_ends_between_blocks() -> None:
    head = beginning(ANSWER, 400)
    assert head.endswith("| deploy | failed |")  # the table whole, the code block left out
    assert len(head) <= 400


def test_a_long_answer_becomes_a_message_and_the_whole_as_a_file() -> None:
    assert as_file(ANSWER, "run-1/answer", threshold=len(ANSWER)) is None
    assert as_file(ANSWER, "run-1/answer", threshold=0) is None  # 0: never a file
    filed = as_file(ANSWER, "run-1/answer", threshold=1000)
    assert filed is not None
    assert filed.data.decode() == ANSWER
    assert re.fullmatch(r"answer-[0-9a-f]{12}\.md", filed.name)
    assert filed.message.startswith("## Why the build failed")
    assert filed.message.endswith(f"is in the attached file {filed.name}._")
    assert fences_balanced(filed.message) and len(filed.message) < 2000
    again = as_file(ANSWER, "run-1/answer", threshold=1000)
    assert again is not None and again.name == filed.name  # a retake names it the same


def test_each_platform_s_pieces_fit_its_message_whatever_the_characters() -> None:
    """Feishu counts a card's bytes (30 KB; a CJK character is 3), Slack a markdown block's
    characters after `<` became `&lt;` (12,000)."""
    chinese = "\n\n".join("部署失败的原因是注册表令牌过期。" * 40 for _ in range(60))
    cards = feishu_pieces(chinese)
    assert len(cards) > 1 and "\n\n".join(cards) == chinese
    assert all(
        len(json.dumps(answer_card(p), ensure_ascii=False).encode()) <= 30_000 for p in cards
    )
    brackets = "\n\n".join("<" * 500 for _ in range(100))
    blocks = slack_pieces(brackets)
    assert all(len(answer_message(p)["blocks"][0]["text"]) <= 12_000 for p in blocks)
    assert "\n\n".join(blocks) == brackets
