"""The file tools (read, write, edit) and their confinement to the work directory."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime.tools import files, safe_open
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolError
from runtime.tools.files import EditArgs, EditTool, ReadArgs, ReadTool, WriteArgs, WriteTool
from runtime.tools.sandbox import Access
from runtime.tools.workdir import confine


@pytest.fixture
def ctx(workdir: Path) -> ToolContext:
    return ToolContext(session="t", workdir=workdir)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file next to (not inside) the work directory."""
    path = tmp_path / "outside.txt"
    path.write_text("outside secret\n", encoding="utf-8")
    return path


async def read(ctx: ToolContext, path: str, offset: int = 1, limit: int | None = None) -> str:
    out = await ReadTool().run(ReadArgs(path=path, offset=offset, limit=limit), ctx)
    return out.text


# --- read ---------------------------------------------------------------------------------


async def test_read_returns_content(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    assert await read(ctx, "a.txt") == "one\ntwo\nthree\n"


async def test_read_offset_and_limit(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.txt").write_text("l1\nl2\nl3\nl4\nl5\n", encoding="utf-8")
    # A part says where the rest starts; the last part is the file's lines as they are.
    assert await read(ctx, "a.txt", offset=2, limit=2) == (
        "l2\nl3\n[lines 2-3 of 5; read on with offset 4]"
    )
    assert await read(ctx, "a.txt", offset=4) == "l4\nl5\n"
    assert await read(ctx, "a.txt", offset=4, limit=9) == "l4\nl5\n"
    assert await read(ctx, "a.txt", limit=1) == "l1\n[lines 1-1 of 5; read on with offset 2]"
    with pytest.raises(ToolError, match=r"offset 10 is past the end of a\.txt, which has 5 lines"):
        await read(ctx, "a.txt", offset=10)
    (workdir / "empty.txt").write_text("", encoding="utf-8")
    assert await read(ctx, "empty.txt") == ""


async def test_read_rejects_bad_offset_and_limit_before_reading() -> None:
    for bad in ({"offset": 0}, {"limit": 0}, {"offset": -3}, {"limit": "x"}):
        with pytest.raises(ValidationError, match=r"greater than or equal to 1|valid integer"):
            ReadArgs.model_validate({"path": "a.txt", **bad})


async def test_read_missing_file(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"nope\.txt: no such file"):
        await read(ctx, "nope.txt")


async def test_read_directory(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    with pytest.raises(ToolError, match="sub is a directory"):
        await read(ctx, "sub")


async def test_read_binary(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "blob.bin").write_bytes(b"abc\x00def")
    with pytest.raises(ToolError, match=r"blob\.bin looks like a binary file"):
        await read(ctx, "blob.bin")


# --- write --------------------------------------------------------------------------------


async def test_write_creates_parent_dirs_with_exact_content(
    ctx: ToolContext, workdir: Path
) -> None:
    content = "first line\n  indented\ttab\nno newline at end ünïcode"
    out = await WriteTool().run(WriteArgs(path="deep/er/new.txt", content=content), ctx)
    target = workdir / "deep" / "er" / "new.txt"
    assert target.read_bytes() == content.encode("utf-8")
    assert "deep/er/new.txt" in out.text


async def test_write_overwrites(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.txt").write_text("old content that is longer", encoding="utf-8")
    await WriteTool().run(WriteArgs(path="a.txt", content="new"), ctx)
    assert (workdir / "a.txt").read_text(encoding="utf-8") == "new"


async def test_write_to_directory_rejected(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        await WriteTool().run(WriteArgs(path="sub", content="x"), ctx)
    assert (workdir / "sub").is_dir()


# --- edit ---------------------------------------------------------------------------------


async def test_edit_exact_replace(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.py").write_text("x = 1\ny = 2\n", encoding="utf-8")
    out = await EditTool().run(EditArgs(path="a.py", old_text="y = 2", new_text="y = 3"), ctx)
    assert (workdir / "a.py").read_text(encoding="utf-8") == "x = 1\ny = 3\n"
    assert "1 occurrence" in out.text


async def test_edit_old_text_missing(ctx: ToolContext, workdir: Path) -> None:
    original = "x = 1\ny = 2\n"
    (workdir / "a.py").write_text(original, encoding="utf-8")
    with pytest.raises(ToolError, match="not found") as info:
        await EditTool().run(EditArgs(path="a.py", old_text="z = 9", new_text="z = 0"), ctx)
    assert "nothing was changed" in str(info.value)
    assert (workdir / "a.py").read_text(encoding="utf-8") == original


async def test_edit_ambiguous(ctx: ToolContext, workdir: Path) -> None:
    original = "foo()\nbar()\nfoo()\n"
    (workdir / "a.py").write_text(original, encoding="utf-8")
    with pytest.raises(ToolError, match="2 times") as info:
        await EditTool().run(EditArgs(path="a.py", old_text="foo()", new_text="baz()"), ctx)
    assert "replace_all" in str(info.value)
    assert (workdir / "a.py").read_text(encoding="utf-8") == original


async def test_edit_replace_all(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.py").write_text("foo()\nbar()\nfoo()\n", encoding="utf-8")
    out = await EditTool().run(
        EditArgs(path="a.py", old_text="foo()", new_text="baz()", replace_all=True), ctx
    )
    assert (workdir / "a.py").read_text(encoding="utf-8") == "baz()\nbar()\nbaz()\n"
    assert "2 occurrence" in out.text


async def test_edit_missing_file(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="no such file"):
        await EditTool().run(EditArgs(path="nope.py", old_text="a", new_text="b"), ctx)


# --- confinement --------------------------------------------------------------------------


async def test_dotdot_rejected_even_if_it_lands_inside(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    (workdir / "x").write_text("inside", encoding="utf-8")
    with pytest.raises(ToolError, match=r"'\.\.'"):
        await read(ctx, "sub/../x")
    with pytest.raises(ToolError, match=r"'\.\.'"):
        await read(ctx, "../x")
    with pytest.raises(ToolError, match=r"'\.\.'"):
        await WriteTool().run(WriteArgs(path="../x", content="pwned"), ctx)
    assert not (workdir.parent / "x").exists()


async def test_absolute_path_outside_rejected(ctx: ToolContext, outside: Path) -> None:
    with pytest.raises(ToolError, match="outside the work directory"):
        await read(ctx, "/etc/passwd")
    with pytest.raises(ToolError, match="outside the work directory"):
        await read(ctx, str(outside))
    with pytest.raises(ToolError, match="outside the work directory"):
        await WriteTool().run(WriteArgs(path=str(outside), content="pwned"), ctx)
    assert outside.read_text(encoding="utf-8") == "outside secret\n"


async def test_absolute_path_inside_accepted(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.txt").write_text("hello\n", encoding="utf-8")
    assert await read(ctx, str(workdir / "a.txt")) == "hello\n"
    await WriteTool().run(WriteArgs(path=str(workdir / "b.txt"), content="abs"), ctx)
    assert (workdir / "b.txt").read_text(encoding="utf-8") == "abs"


async def test_symlink_to_outside_file_rejected_for_read(
    ctx: ToolContext, workdir: Path, outside: Path
) -> None:
    (workdir / "link.txt").symlink_to(outside)
    with pytest.raises(ToolError, match="symlink"):
        await read(ctx, "link.txt")


async def test_symlink_to_outside_file_rejected_for_write_and_edit(
    ctx: ToolContext, workdir: Path, outside: Path
) -> None:
    (workdir / "link.txt").symlink_to(outside)
    with pytest.raises(ToolError, match="symlink"):
        await WriteTool().run(WriteArgs(path="link.txt", content="pwned"), ctx)
    with pytest.raises(ToolError, match="symlink"):
        await EditTool().run(EditArgs(path="link.txt", old_text="secret", new_text="x"), ctx)
    assert outside.read_text(encoding="utf-8") == "outside secret\n"
    assert (workdir / "link.txt").is_symlink()


async def test_dangling_symlink_to_outside_rejected_for_write(
    ctx: ToolContext, workdir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "not-yet.txt"
    (workdir / "link.txt").symlink_to(target)
    with pytest.raises(ToolError, match="symlink"):
        await WriteTool().run(WriteArgs(path="link.txt", content="pwned"), ctx)
    assert not target.exists()


async def test_symlinked_directory_escaping_rejected(
    ctx: ToolContext, workdir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_text("far away\n", encoding="utf-8")
    (workdir / "dirlink").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ToolError, match="symlink"):
        await read(ctx, "dirlink/f.txt")
    with pytest.raises(ToolError, match="symlink"):
        await WriteTool().run(WriteArgs(path="dirlink/new.txt", content="pwned"), ctx)
    with pytest.raises(ToolError, match="symlink"):
        await WriteTool().run(WriteArgs(path="dirlink/f.txt", content="pwned"), ctx)
    assert not (elsewhere / "new.txt").exists()
    assert (elsewhere / "f.txt").read_text(encoding="utf-8") == "far away\n"


async def test_symlink_inside_workdir_is_fine(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "real").mkdir()
    (workdir / "real" / "a.txt").write_text("real content\n", encoding="utf-8")
    (workdir / "alias.txt").symlink_to(workdir / "real" / "a.txt")
    (workdir / "dir-alias").symlink_to("real", target_is_directory=True)
    assert await read(ctx, "alias.txt") == "real content\n"
    assert await read(ctx, "dir-alias/a.txt") == "real content\n"
    # A change through a link runs only approved (the judge asks for every one).
    with pytest.raises(ToolError, match="a change through a link needs approval"):
        await WriteTool().run(WriteArgs(path="dir-alias/b.txt", content="via alias"), ctx)
    assert not (workdir / "real" / "b.txt").exists()
    approved = replace(ctx, access=Access.APPROVED)
    await WriteTool().run(WriteArgs(path="dir-alias/b.txt", content="via alias"), approved)
    assert (workdir / "real" / "b.txt").read_text(encoding="utf-8") == "via alias"


async def test_a_link_swapped_in_after_the_judge_is_not_followed_unasked(
    ctx: ToolContext, workdir: Path
) -> None:
    """The judge saw a plain file; by the time the call runs it is a link to a secret or to
    git's config: neither is read nor changed without approval."""
    (workdir / ".git").mkdir()
    (workdir / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (workdir / ".env").write_text("TOKEN=CANARY\n", encoding="utf-8")
    (workdir / "notes.md").symlink_to(".env")
    (workdir / "guide.md").symlink_to(".git/config")
    with pytest.raises(ToolError, match="it was not read"):
        await read(ctx, "notes.md")
    with pytest.raises(ToolError, match="nothing was changed"):
        await WriteTool().run(WriteArgs(path="guide.md", content="[core]\n\tfsmonitor = x"), ctx)
    with pytest.raises(ToolError, match="nothing was changed"):
        await EditTool().run(EditArgs(path="guide.md", old_text="[core]", new_text="x"), ctx)
    assert (workdir / ".git" / "config").read_text(encoding="utf-8") == "[core]\n"


@pytest.mark.parametrize("path", ["", "   ", "\t"])
async def test_empty_path_rejected(ctx: ToolContext, path: str) -> None:
    with pytest.raises(ToolError, match="must not be empty"):
        await read(ctx, path)
    with pytest.raises(ToolError, match="must not be empty"):
        await WriteTool().run(WriteArgs(path=path, content="x"), ctx)


def test_confine_returns_resolved_path_inside(workdir: Path) -> None:
    assert confine(workdir, "a/b.txt") == workdir.resolve() / "a" / "b.txt"
    assert confine(workdir, ".") == workdir.resolve()


def test_confine_rejects_nul_byte(workdir: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        confine(workdir, "a\x00b")


def test_confine_rejects_relative_symlink_target(workdir: Path, tmp_path: Path) -> None:
    # The link's own text is relative (".."), but the user path contains no '..'.
    (workdir / "hop").symlink_to(os.path.relpath(tmp_path, workdir), target_is_directory=True)
    with pytest.raises(ToolError, match="symlink"):
        confine(workdir, "hop/outside.txt")


def test_confine_turns_a_symlink_loop_into_a_clear_error(workdir: Path) -> None:
    os.symlink("loop", workdir / "loop")
    with pytest.raises(ToolError, match="cannot be resolved"):
        confine(workdir, "loop")


async def test_write_below_an_existing_file_is_a_clear_error(
    ctx: ToolContext, workdir: Path
) -> None:
    (workdir / "f.txt").write_text("file")
    with pytest.raises(ToolError, match=r"cannot write f\.txt/b\.txt"):
        await WriteTool().run(WriteArgs(path="f.txt/b.txt", content="x"), ctx)
    assert (workdir / "f.txt").read_text() == "file"


async def test_edit_refuses_non_utf8_files_and_leaves_them_untouched(
    ctx: ToolContext, workdir: Path
) -> None:
    raw = b"caf\xe9 hello\n"
    (workdir / "latin1.txt").write_bytes(raw)
    with pytest.raises(ToolError, match="not valid UTF-8"):
        await EditTool().run(EditArgs(path="latin1.txt", old_text="hello", new_text="bye"), ctx)
    assert (workdir / "latin1.txt").read_bytes() == raw


# --- opening what was judged: links, hard links, fifos, devices, sockets -----------------


def swap_after_confine(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """The race between the judge and the open, made deterministic: `swap` runs right after
    the tool resolved its path."""

    def confine_then_swap(workdir: Path, user_path: str) -> Path:
        resolved = confine(workdir, user_path)
        swap()
        return resolved

    monkeypatch.setattr(files, "confine", confine_then_swap)


@pytest.fixture
def git_config(workdir: Path) -> Path:
    (workdir / ".git").mkdir()
    config = workdir / ".git" / "config"
    config.write_text("[core]\n\tbare = false\n")
    (workdir / "docs").mkdir()
    (workdir / "docs" / "guide.md").write_text("# guide\n")
    return config


async def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    ctx: ToolContext, workdir: Path, git_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guide = workdir / "docs" / "guide.md"

    def swap() -> None:
        guide.unlink()
        guide.symlink_to(git_config)

    swap_after_confine(monkeypatch, swap)
    calls: tuple[tuple[Tool[Any], ToolArgs], ...] = (
        (WriteTool(), WriteArgs(path="docs/guide.md", content="[core]\n\tfsmonitor = x")),
        (EditTool(), EditArgs(path="docs/guide.md", old_text="bare", new_text="fsmonitor")),
        (ReadTool(), ReadArgs(path="docs/guide.md")),
    )
    for tool, args in calls:
        guide.unlink()
        guide.write_text("# guide\n")  # a plain file when the call is checked
        with pytest.raises(
            ToolError, match=r"docs/guide\.md is a symlink now .*refusing to follow"
        ):
            await tool.run(args, ctx)
        assert git_config.read_text() == "[core]\n\tbare = false\n"


async def test_a_directory_swapped_for_a_symlink_is_not_followed(
    ctx: ToolContext, workdir: Path, git_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = workdir / "docs"

    def swap() -> None:
        (docs / "guide.md").unlink()
        docs.rmdir()
        docs.symlink_to(workdir / ".git", target_is_directory=True)

    swap_after_confine(monkeypatch, swap)
    with pytest.raises(ToolError, match=r"docs is a symlink now"):
        await WriteTool().run(WriteArgs(path="docs/config", content="pwned"), ctx)
    assert git_config.read_text() == "[core]\n\tbare = false\n"


async def test_a_hard_link_is_refused_and_both_names_stay_unchanged(
    ctx: ToolContext, workdir: Path, git_config: Path
) -> None:
    guide = workdir / "docs" / "guide.md"
    guide.unlink()
    os.link(git_config, guide)  # what an approved `tar -xf` can plant
    refusal = (
        r"docs/guide\.md has 2 hard links \(another name of the same file may be a protected "
        r"one such as \.git/config\); refusing"
    )
    with pytest.raises(ToolError, match=refusal):
        await WriteTool().run(
            WriteArgs(path="docs/guide.md", content="[core]\n\tfsmonitor = x"), ctx
        )
    with pytest.raises(ToolError, match=refusal):
        await EditTool().run(EditArgs(path="docs/guide.md", old_text="bare", new_text="x"), ctx)
    with pytest.raises(ToolError, match=refusal):
        await read(ctx, "docs/guide.md")
    assert git_config.read_text() == guide.read_text() == "[core]\n\tbare = false\n"
    assert os.stat(guide).st_nlink == 2


async def test_a_fifo_is_refused_at_once_and_blocks_nobody(ctx: ToolContext, workdir: Path) -> None:
    os.mkfifo(workdir / "pipe")
    (workdir / "a.txt").write_text("plain\n")
    with pytest.raises(ToolError, match="pipe is a fifo, not a regular file"):
        await asyncio.wait_for(read(ctx, "pipe"), 2)
    calls: tuple[tuple[Tool[Any], ToolArgs], ...] = (
        (WriteTool(), WriteArgs(path="pipe", content="x")),
        (EditTool(), EditArgs(path="pipe", old_text="a", new_text="b")),
    )
    for tool, args in calls:
        with pytest.raises(ToolError, match="pipe is a fifo, not a regular file"):
            await asyncio.wait_for(tool.run(args, ctx), 2)

    # Ten reads of the fifo (six used to hold the default executor's threads for good), and a
    # normal read among them, all answered within the timeout.
    fifo_reads = [read(ctx, "pipe") for _ in range(10)]
    outcomes = await asyncio.wait_for(
        asyncio.gather(*fifo_reads, read(ctx, "a.txt"), return_exceptions=True), 5
    )
    assert all(isinstance(o, ToolError) and "fifo" in str(o) for o in outcomes[:10])
    assert outcomes[10] == "plain\n"
    assert await asyncio.wait_for(read(ctx, "a.txt"), 2) == "plain\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
async def test_a_device_is_refused(ctx: ToolContext, workdir: Path) -> None:
    os.mknod(workdir / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with pytest.raises(ToolError, match="null is a character device, not a regular file"):
        await read(ctx, "null")
    with pytest.raises(ToolError, match="null is a character device, not a regular file"):
        await WriteTool().run(WriteArgs(path="null", content="x"), ctx)


async def test_a_socket_is_refused(
    ctx: ToolContext, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)  # a short relative name: socket paths are limited to 108 bytes
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind("sock")
        server.listen()
        calls: tuple[tuple[Tool[Any], ToolArgs], ...] = (
            (ReadTool(), ReadArgs(path="sock")),
            (WriteTool(), WriteArgs(path="sock", content="SET x 1\r\n")),
        )
        for tool, args in calls:
            with pytest.raises(ToolError, match="sock is a socket, not a regular file"):
                await tool.run(args, ctx)


async def test_file_work_that_hangs_times_out_and_starves_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(safe_open, "FILE_TIMEOUT", 0.2)
    release = threading.Event()
    hung = [safe_open.off_loop(lambda: release.wait(5), f"read x{i}") for i in range(6)]
    try:
        outcomes = await asyncio.gather(*hung, return_exceptions=True)
        assert [str(o) for o in outcomes] == [
            f"read x{i} timed out after 0.2 s (it may still complete: check before trying again)"
            for i in range(6)
        ]
        # The file pool is its own: the default executor (the judge's glob expansion) answers.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "judged"), 1) == "judged"
    finally:
        release.set()
