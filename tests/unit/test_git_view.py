"""The read-only view's git config: only keys that are data, URLs without credentials, and
the file git reads back means what the original meant."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runtime.tools.git_view import sanitized, without_credentials


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://github_pat_11AB@github.com/o/r.git", "https://github.com/o/r.git"),
        ("https://x-access-token:ghp_x@github.com/o/r", "https://github.com/o/r"),
        ("HTTP://user@host/r", "HTTP://host/r"),
        ("ssh://git:hunter2@host/r", "ssh://git@host/r"),
        ("ssh://git@host/r", "ssh://git@host/r"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("https://host/r?x=@y", "https://host/r?x=@y"),  # an @ after the host is no userinfo
    ],
)
def test_urls_lose_their_credentials(url: str, shown: str) -> None:
    assert without_credentials(url) == shown


def test_only_safe_keys_are_kept_and_git_reads_them_back(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "[core]\n\tbare\n\tfsmonitor = touch /tmp/x\n\thooksPath = hooks\n\tpager = less\n"
        '[remote "or\\"igin"]\n\turl = https://tok@h/r "q"\n\tuploadpack = evil\n'
        "[include]\n\tpath = other\n[alias]\n\tst = !evil\n"
        '[diff "x"]\n\ttextconv = evil\n[filter "f"]\n\tclean = evil\n'
        "[extensions]\n\tobjectFormat = sha256\n"
    )
    copy = tmp_path / "copy"
    copy.write_bytes(sanitized(config))
    done = subprocess.run(
        ["git", "config", "--file", str(copy), "--list"], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "core.bare",  # a key without a value stays true
        'remote.or"igin.url=https://h/r q',
        "extensions.objectformat=sha256",
    ]


def test_a_file_git_cannot_read_becomes_empty(tmp_path: Path) -> None:
    broken = tmp_path / "config"
    broken.write_text("[core\n\tfsmonitor = evil\n")
    assert sanitized(broken) == b""
    assert sanitized(tmp_path / "gone") == b""
