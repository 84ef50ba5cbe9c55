"""What people may see: secrets masked (tokens, URL userinfo, query values, password flags of
the programs that take them), hidden characters shown escaped, in every text a chat, the
terminal or an operator's screen shows; every pattern linear in the text."""

from __future__ import annotations

import importlib
import io
import json
import re
import unicodedata
from typing import Any

import pytest

from adapters.console.channel import render, render_request
from adapters.feishu.cards import approval_card
from adapters.pending import render_pending
from adapters.slack.blocks import approval_blocks
from bot.cli_approvals import rows
from bot.tables import print_table
from runtime import redact as redaction
from runtime.approval.models import ApprovalRecord
from runtime.approval.notices import notice_of
from runtime.channel import Event, RedactingChannel, Reply, ToolStarted, Writing, redacted
from runtime.models import Actor, ConversationRef
from runtime.redact import MASK, one_line, redact_text, visible

sre: Any = importlib.import_module("re._parser")  # a pattern parsed, to look for nested repeats
PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"
MASKED = [
    # Token formats.
    (f"origin https://{PAT}@github.com/org/repo.git (fetch)",
     "origin https://[redacted]@github.com/org/repo.git (fetch)"),
    (f"token {PAT}", "token [redacted]"),
    # A key masked first, then its header: masked once, nothing of it left over.
    ('-H "Authorization: Bearer sk-abcdefghijklmnopqrstuvwx"', '-H "Authorization: [redacted]"'),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", MASK),
    ("gho_abcdefghijklmnopqrstuvwxyz0123456789", MASK),
    ("ghs_abcdefghijklmnopqrstuvwxyz0123456789", MASK),
    ("glpat-abcdefghij0123456789", MASK),
    ("glpat-abcdefghij0123456789abcdefg.01.0w1x2y3z4", MASK),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", MASK),
    ("hf_abcdefghijklmnopqrstuvwxyz0123456789", MASK),
    ("ASIAABCDEFGHIJKLMNOP", MASK),
    # URL userinfo: a password always; a user alone unless it is a plain name.
    ("https://x-access-token:ghs_abcdefghijklmnopqrstuvwxyz12@github.com/o/r",
     "https://x-access-token:[redacted]@github.com/o/r"),
    ("https://x-access-token:s3cr3t@github.com/o/r", "https://x-access-token:[redacted]@github.com/o/r"),
    ("https://abc123DEF456@github.com/o/r", "https://[redacted]@github.com/o/r"),
    ("https://0123456789abcdef0123456789abcdef01234567@github.com/o/r",
     "https://[redacted]@github.com/o/r"),
    ("https://TOKEN:x-oauth-basic@github.com/o", "https://[redacted]:[redacted]@github.com/o"),
    ("redis://:hunter2@127.0.0.1:6379/0", "redis://:[redacted]@127.0.0.1:6379/0"),
    ("redis://default:hunter2@db:6379", "redis://default:[redacted]@db:6379"),
    ("postgres://app:p@ss@db/app", "postgres://app:[redacted]@db/app"),
    # Query values whose name says key, signature, token, secret.
    ("curl 'https://h/x?key=abc&sig=def&page=2'", "curl 'https://h/x?key=[redacted]&sig=[redacted]&page=2'"),
    ("GET /cb?access_token=abc123&state=x", "GET /cb?access_token=[redacted]&state=x"),
    ("https://s3/b/o?X-Amz-Signature=ab12&X-Amz-Expires=60",
     "https://s3/b/o?X-Amz-Signature=[redacted]&X-Amz-Expires=60"),
    ("https://h/x?signature=ab12#top", "https://h/x?signature=[redacted]#top"),
    ("https://h/x?api_key=ab12", "https://h/x?api_key=[redacted]"),
    ("https://h/x?secret=ab12", "https://h/x?secret=[redacted]"),
    # Password flags, for the program named before them on the line.
    ("redis-cli -h db -a hunter2 SET x 1", "redis-cli -h db -a [redacted] SET x 1"),
    ("valkey-cli -a hunter2 ping", "valkey-cli -a [redacted] ping"),
    ("sshpass -p hunter2 ssh deploy@host", "sshpass -p [redacted] ssh deploy@host"),
    ("sshpass -phunter2 ssh host", "sshpass -p[redacted] ssh host"),
    ("sshpass -p 'my pass' ssh host", "sshpass -p [redacted] ssh host"),
    ("mysql -uroot -phunter2 shop", "mysql -uroot -p[redacted] shop"),
    ("mysqldump -u root -phunter2 shop > d.sql", "mysqldump -u root -p[redacted] shop > d.sql"),
    ("mariadb-dump -phunter2 shop", "mariadb-dump -p[redacted] shop"),
    ("mysql \\\n  -h db \\\n  -phunter2 shop", "mysql \\\n  -h db \\\n  -p[redacted] shop"),
    ("mysql --password=hunter2 shop", "mysql --password=[redacted] shop"),
    ("mysql --password hunter2", "mysql --password [redacted]"),
    ("mongosh -u admin -p hunter2", "mongosh -u admin -p [redacted]"),
    ("sqlcmd -S db -U sa -P hunter2", "sqlcmd -S db -U sa -P [redacted]"),
    ("ipmitool -H bmc -U admin -P hunter2 power", "ipmitool -H bmc -U admin -P [redacted] power"),
    ("zip -P hunter2 out.zip f", "zip -P [redacted] out.zip f"),
    ("7z a -phunter2 out.7z f", "7z a -p[redacted] out.7z f"),
    ("ldapsearch -x -D cn=admin -w hunter2 uid=x", "ldapsearch -x -D cn=admin -w [redacted] uid=x"),
    ("smbclient //h/s -U bob%hunter2", "smbclient //h/s -U bob%[redacted]"),
    ("docker login -u me -p hunter2 registry", "docker login -u me -p [redacted] registry"),
    ("openssl enc -aes256 -k hunter2", "openssl enc -aes256 -k [redacted]"),
    ("openssl rsa -passin pass:hunter2 -in k", "openssl rsa -passin pass:[redacted] -in k"),
    ("keytool -list -storepass hunter2", "keytool -list -storepass [redacted]"),
    ("wget --http-password=hunter2 https://h/f", "wget --http-password=[redacted] https://h/f"),
    ("curl --user bob:hunter2 https://h", "curl --user bob:[redacted] https://h"),
    # A quoted secret still being written (a preview) is masked to its end.
    ('the config says "password": "correct horse', 'the config says "password": [redacted]'),
]  # fmt: skip
UNCHANGED = [
    "Ordinary text: the build passed, 3 tests were skipped.",
    "ssh -p 22 deploy@host uptime",
    "psql -p 5432 -h db -U app shop",
    "mysql -p shop",  # -p alone asks for the password; `shop` is the database
    "psql --no-password -h db",
    "git@github.com:org/repo.git",
    "git clone git@github.com:org/repo.git && cd repo",
    "https://github.com/org/repo",
    "ssh://git@github.com/org/repo.git",
    "https://github.com/org/repo/blob/main/README.md?plain=1#L10",
    "mailto:alice@example.com",
    "scp -P 2222 f host:",
    "grep -p x file",
    "tar -xpf a.tar",
    "the sig of a function; keys and tokens in general",
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_secrets_are_masked(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # masking again changes nothing


@pytest.mark.parametrize("text", UNCHANGED)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


# Adversarial shapes, 200 KB each: a pattern that backtracks over the text from every position
# would take hours here (quadratic), a linear one a few milliseconds. No time is asserted:
# such a regression shows as a test that does not end. Measured at 1 MB each: at most ~0.5 s.
ADVERSARIAL = [
    "a" * 200_000,
    "-p " * 70_000,
    "https://" * 25_000,
    "@" * 200_000,
    "://" + "a" * 200_000,
    "https://" + "a:" * 100_000 + "@",
    "mysql " * 35_000,
    "sshpass -p " * 20_000,
    "-" * 200_000,
    "--" + "a" * 200_000,
    "password=" * 25_000,
    'password="' + "a" * 200_000,
    "?" + "a" * 200_000,
    "?key" * 50_000,
    "eyJ" * 70_000,
    "bearer " * 30_000,
    " -u " + "a" * 200_000,
    "\u202e" * 200_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:12]))
def test_long_adversarial_texts_are_redacted_in_one_pass(text: str) -> None:
    masked = redact_text(text)
    assert redact_text(masked) == masked and one_line(masked, len(text) * 7)


def _repeats(pattern: Any, inside: bool = False) -> list[str]:
    """The repeats (a `*`, `+` or `{n,}`) nested inside another repeat in a parsed pattern."""
    found = []
    for op, value in pattern:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            _, high, sub = value
            if inside and high > 1:
                found.append(str(sub))
            found += _repeats(sub, inside or high > 1)
        elif op in (sre.SUBPATTERN, sre.ATOMIC_GROUP):
            found += _repeats(value[-1], inside)
        elif op == sre.BRANCH:
            for branch in value[1]:
                found += _repeats(branch, inside)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            found += _repeats(value[1], inside)
    return found


def test_no_pattern_nests_repeats() -> None:
    """A repeat inside a repeat (`(a+)+`, `(\\w+\\s?)*`) is the shape that backtracks."""
    patterns = []
    for value in vars(redaction).values():
        items = value.values() if isinstance(value, dict) else value
        patterns += [p for p in (items if isinstance(value, list | dict) else [value])]
    patterns = [p for p in patterns if isinstance(p, re.Pattern)]
    assert len(patterns) > 25
    nested = {p.pattern: found for p in patterns if (found := _repeats(sre.parse(p.pattern)))}
    assert not nested, nested
    assert _repeats(sre.parse(r"(\w+\s?)*$"))  # what it would catch


# -- hidden characters ------------------------------------------------------------------------

HIDDEN = "rm -rf ./\u202egnp.txt\u202c \u200bx\u2066y\u2069 \ufeff\u00ad\u2028\x1b[2J\U000e0041"


def test_hidden_characters_are_shown_escaped() -> None:
    shown = visible(HIDDEN)
    assert shown == (
        "rm -rf ./\\u202egnp.txt\\u202c \\u200bx\\u2066y\\u2069 \\ufeff\\u00ad\\u2028"
        "\\u001b[2J\\udb40\\udc41"
    )
    assert visible("a\nb\tc — ünïcödé, 中文, עברית") == "a\nb\tc — ünïcödé, 中文, עברית"
    assert visible(shown) == shown


def test_every_control_format_and_separator_character_is_escaped() -> None:
    """Each character of Unicode's categories Cc (but newline and tab), Cf, Zl and Zp, as this
    Python knows them: a newer Unicode that adds one fails here until the class has it."""
    kinds = ("Cc", "Cf", "Zl", "Zp")
    hidden = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in kinds]
    text = "".join(c for c in hidden if c not in "\n\t")
    assert "\\" not in text and not re.search(r"[^\\u0-9a-f]", visible(text))


def test_a_line_separator_is_escaped_before_a_line_is_folded() -> None:
    assert one_line("echo ok\u2028rm -rf ~\n  done") == "echo ok\\u2028rm -rf ~ done"


def test_escaped_json_is_the_same_json() -> None:
    value = {"command": HIDDEN, "path": "a\\u202eb"}
    text = visible(json.dumps(value, indent=2, ensure_ascii=False))
    assert "\u202e" not in text and json.loads(text) == value


# -- the texts people see -----------------------------------------------------------------------


def record(arguments: dict[str, Any], **changes: Any) -> ApprovalRecord:
    values: dict[str, Any] = {
        "id": "ab12cd",
        "session": "s1",
        "conversation": ConversationRef(platform="console", id="console:test"),
        "requester": Actor(platform="console", user_id="alice"),
        "tool": "bash",
        "arguments": json.dumps(arguments),
        "call_id": "c1",
        "call_hash": "h",
        "reasons": ["network access: sshpass -p hunter2 ssh host \u202eevil"],
        "expires_at": 1_700_000_000_000,
        **changes,
    }
    return ApprovalRecord(**values)


def surfaces(rec: ApprovalRecord) -> list[str]:
    """Every text the notice of `rec` is shown as: Slack, Feishu, the terminal, `/pending`,
    `clawgate approvals list`."""
    notice = notice_of(rec)
    table = io.StringIO()
    cells = [(row[0], row[-1]) for row in rows([notice])]
    print_table(["ID", "ARGUMENTS"], cells, table, width=200)
    return [
        json.dumps(approval_blocks(notice), ensure_ascii=False),
        json.dumps(approval_card(notice), ensure_ascii=False),
        render_request(notice),
        render_pending(notice),
        table.getvalue(),
    ]


@pytest.mark.parametrize(
    "command",
    [
        "sshpass -p hunter2 ssh host uptime",
        "redis-cli -a hunter2 SET k v",
        "mysql -uroot -phunter2 -e 'select 1'",
        "curl 'https://h/x?key=hunter2&sig=hunter2'",
        "git push https://hunter2@github.com/org/repo main",
    ],
)
def test_a_secret_in_a_call_shows_nowhere(command: str) -> None:
    rec = record({"command": command})
    assert notice_of(rec).editable == ""  # no edit button or form carries the secret
    for text in surfaces(rec):
        assert "hunter2" not in text and MASK in text, text


def test_hidden_characters_in_a_call_show_escaped_everywhere() -> None:
    rec = record({"command": "cat ./\u202etxt.hs"}, reason="ok\u200b", reasons=["reads \u2066x"])
    notice = notice_of(rec)
    for text in surfaces(rec):
        assert not re.search("[\u200b\u202e\u2066]", text), text
        assert "\\u202e" in text
    # The edit form: prefilled with JSON that escapes them, which submits the same call.
    assert "\\u202e" in notice.editable and json.loads(notice.editable) == json.loads(rec.arguments)
    assert notice.reasons == ("reads \\u2066x",) and notice.reason == "ok\\u200b"


def test_events_go_out_redacted_and_previews_hold_back_the_word_being_written() -> None:
    assert redacted(Reply(f"see https://{PAT}@github.com")) == Reply(
        "see https://[redacted]@github.com"
    )
    # The preview shows the text up to its last space: never the first part of a token.
    assert redacted(Writing("origin https://github_pat_11AB")) == Writing("origin ")
    assert redacted(Writing("远程是https://github_pat_11AB")) == Writing("远程是")
    assert redacted(Writing("你好世界。然后")) == Writing("你好世界。然后")  # no spaces in CJK
    assert redacted(Writing(f"origin https://{PAT}@github.com ")) == Writing(
        "origin https://[redacted]@github.com "
    )
    started = redacted(ToolStarted("c1", "bash", "$ redis-cli -a hunter2 \u202eping"))
    assert started == ToolStarted("c1", "bash", "$ redis-cli -a [redacted] \\u202eping")
    assert render(redacted(Reply("done\x1b[2J"))) == "done\\u001b[2J"  # the terminal's screen


class Seen:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def send(self, conversation: ConversationRef, event: Event) -> None:
        self.events.append(event)


async def test_previews_go_on_at_most_once_per_interval_each_redacted_whole() -> None:
    now = [0.0]
    seen = Seen()
    channel = RedactingChannel(seen, interval=0.25, clock=lambda: now[0])
    where = ConversationRef(platform="console", id="console:test")
    text = ""
    for piece in ("origin ", "https://", PAT[:20], PAT[20:], "@github.com ", "ok "):
        text += piece
        await channel.send(where, Writing(text))
        now[0] += 0.15
    await channel.send(where, Reply(text))
    await channel.send(where, Writing("next "))  # a new answer: its first piece goes on
    assert seen.events == [
        Writing("origin "),  # at 0 s
        Writing("origin "),  # at 0.3 s: the token is not whole yet, and none of it shows
        Writing("origin https://[redacted]@github.com "),  # at 0.6 s
        Reply("origin https://[redacted]@github.com ok "),
        Writing("next "),
    ]
