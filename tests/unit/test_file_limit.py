"""`serve` raises its soft limit on open files to the hard one, and says so when even that
leaves too little room for CLAWGATE_HTTP_MAX_CONNECTIONS (bot/http_limits.py)."""

from __future__ import annotations

import asyncio
import errno
import resource
import subprocess
import sys

import pytest

from bot.http_limits import ACCEPT_FAILED, say_failed_accepts

PROBE = (
    "import resource, sys; from bot import http_limits; "
    "http_limits.FILES_WANTED = int(sys.argv[2]); "
    "said = http_limits.raise_file_limit(int(sys.argv[1])); "
    "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0]); print(said)"
)


def probe(soft: int, hard: int, connections: int, wanted: int = 65_536) -> tuple[int, str]:
    """In a child process given (`soft`, `hard`) files, with FILES_WANTED at `wanted` (this
    machine's own hard limit may be under 65,536)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(connections), str(wanted)],
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)),
        capture_output=True,
        text=True,
        check=True,
    )
    limit, said = done.stdout.splitlines()
    return int(limit), said


def test_the_soft_limit_is_raised_to_the_hard_one_or_65536() -> None:
    assert probe(256, 4096, 512) == (4096, "None")
    # No higher than wanted, or needed: children (commands, MCP servers) inherit it.
    assert probe(256, 4096, 512, wanted=2048)[0] == 2048
    assert probe(256, 4096, 3000, wanted=2048)[0] == 3256


def test_a_hard_limit_too_low_for_the_connections_is_said_with_the_fix() -> None:
    limit, said = probe(256, 512, 512)
    assert limit == 512
    assert "may open 512 files (`ulimit -n`)" in said
    assert "CLAWGATE_HTTP_MAX_CONNECTIONS" in said


@pytest.mark.parametrize("connections", [1, 256])
def test_enough_room_says_nothing(connections: int) -> None:
    assert probe(1024, 1024, connections)[1] == "None"


def test_failed_accepts_are_one_line_a_minute_and_other_errors_pass_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passed_on: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda _, context: passed_on.append(context["message"]))
        say_failed_accepts(loop)
        emfile = OSError(errno.EMFILE, "Too many open files")
        with caplog.at_level("WARNING", logger="bot.http_limits"):
            for _ in range(5):
                loop.call_exception_handler({"message": ACCEPT_FAILED, "exception": emfile})
            loop.call_exception_handler({"message": "something else"})
    finally:
        loop.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "cannot accept connections (Too many open files" in lines[0]
    assert not any(r.exc_info for r in caplog.records)
    assert passed_on == ["something else"]
