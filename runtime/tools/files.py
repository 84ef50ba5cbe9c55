"""File tools confined to the work directory: read, write, edit."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from pydantic import Field

from runtime.risk.secrets import secret_location
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from runtime.tools.safe_open import Intent, off_loop, opened, read_all, replace_all
from runtime.tools.sandbox import Access
from runtime.tools.workdir import confine, relative

MAX_READ_BYTES = 2_000_000


def _decoded(fd: int, shown: str, *, strict: bool = False) -> str:
    """The file as text; with `strict`, refuse what is not UTF-8 (an edit must not rewrite
    bytes it never touched)."""
    data = read_all(fd, MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise ToolError(f"{shown} is larger than {MAX_READ_BYTES} bytes")
    if b"\x00" in data:
        raise ToolError(f"{shown} looks like a binary file")
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not valid UTF-8 text; it was not changed") from exc


def _read_text(root: Path, path: Path, shown: str) -> str:
    with opened(root, path, Intent.READ) as fd:
        return _decoded(fd, shown)


def _write_text(root: Path, path: Path, content: str) -> None:
    with opened(root, path, Intent.WRITE) as fd:
        replace_all(fd, content.encode("utf-8"))


def _update_text(
    root: Path, path: Path, shown: str, change: Callable[[str], tuple[str, int]]
) -> int:
    """Read, change and write back through one descriptor (what was read is what is
    written); what `change` counted."""
    with opened(root, path, Intent.UPDATE) as fd:
        updated, count = change(_decoded(fd, shown, strict=True))
        replace_all(fd, updated.encode("utf-8"))
        return count


def judged(ctx: ToolContext, user_path: str, *, change: bool) -> tuple[Path, str]:
    """The confined path and how it is shown, refused when a symlink now leads where the
    judge would have asked: the judge saw the path before this call ran, and a link swapped
    in meanwhile (by an approved command, or a concurrent process) must not be followed
    unasked. A change through any link asks (the judge asks for every one), a read through a
    link to a secret asks; an approved call was judged again just before it ran."""
    path = confine(ctx.workdir, user_path)
    shown = relative(ctx.workdir, path)
    if ctx.access is Access.APPROVED or path == ctx.workdir.resolve() / user_path:
        return path, shown
    if change:
        raise ToolError(
            f"{user_path} is a symlink to {shown} now (it was not when the call was checked); "
            "nothing was changed: a change through a link needs approval"
        )
    why = secret_location(shown)
    if why is not None:
        raise ToolError(
            f"{user_path} is a symlink to {shown} now ({why}); it was not read: reading it "
            "needs approval"
        )
    return path, shown


class ReadArgs(ToolArgs):
    path: str = Field(description="File path relative to the work directory.")
    offset: int = Field(1, ge=1, description="First line to return (1-based).")
    limit: int | None = Field(
        None, ge=1, description="Maximum number of lines to return (default: to the end)."
    )


class ReadTool(Tool[ReadArgs]):
    name = "read"
    description = (
        "Read a UTF-8 text file from the work directory; offset and limit (in lines) read "
        "part of a long one."
    )
    args_model = ReadArgs
    parallel_safe = True

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolOutput:
        path, shown = judged(ctx, args.path, change=False)
        text = await off_loop(
            partial(_read_text, ctx.workdir.resolve(), path, shown), f"read {shown}"
        )
        lines = text.splitlines(keepends=True)
        if args.offset > max(len(lines), 1):
            raise ToolError(
                f"offset {args.offset} is past the end of {shown}, which has {len(lines)} lines"
            )
        end = len(lines) if args.limit is None else min(len(lines), args.offset - 1 + args.limit)
        picked = "".join(lines[args.offset - 1 : end])
        if end < len(lines):  # say what is left, so that the model can read on
            if not picked.endswith("\n"):
                picked += "\n"
            picked += f"[lines {args.offset}-{end} of {len(lines)}; read on with offset {end + 1}]"
        count = end - args.offset + 1 if lines else 0
        return ToolOutput(picked, display=f"read {shown} ({count} lines)")

    def summarize(self, args: ReadArgs) -> str:
        return f"read {args.path}"


class WriteArgs(ToolArgs):
    path: str = Field(description="File path relative to the work directory.")
    content: str = Field(description="The complete new file content.")


class WriteTool(Tool[WriteArgs]):
    name = "write"
    description = "Create or overwrite a text file in the work directory."
    args_model = WriteArgs

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolOutput:
        path, shown = judged(ctx, args.path, change=True)
        await off_loop(
            partial(_write_text, ctx.workdir.resolve(), path, args.content), f"write {shown}"
        )
        size = len(args.content.encode())
        return ToolOutput(f"wrote {size} bytes to {shown}", display=f"wrote {shown} ({size} bytes)")

    def summarize(self, args: WriteArgs) -> str:
        return f"write {args.path} ({len(args.content)} chars)"


class EditArgs(ToolArgs):
    path: str = Field(description="File path relative to the work directory.")
    old_text: str = Field(min_length=1, description="Exact text to replace.")
    new_text: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one.")


def _replaced(args: EditArgs, shown: str, text: str) -> tuple[str, int]:
    """`text` edited as `args` say, and how many occurrences were replaced."""
    count = text.count(args.old_text)
    if count == 0:
        raise ToolError(f"old_text was not found in {shown}; nothing was changed")
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"old_text occurs {count} times in {shown}; add surrounding context to make it "
            "unique or set replace_all; nothing was changed"
        )
    return text.replace(args.old_text, args.new_text), count


class EditTool(Tool[EditArgs]):
    name = "edit"
    description = (
        "Replace exact text in a file. old_text must occur exactly once unless replace_all is set."
    )
    args_model = EditArgs

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolOutput:
        path, shown = judged(ctx, args.path, change=True)
        root = ctx.workdir.resolve()
        change = partial(_replaced, args, shown)
        count = await off_loop(partial(_update_text, root, path, shown, change), f"edit {shown}")
        removed = args.old_text.count("\n") * count
        added = args.new_text.count("\n") * count
        return ToolOutput(
            f"replaced {count} occurrence(s) in {shown}",
            display=f"edited {shown} (-{removed} +{added} lines)",
        )

    def summarize(self, args: EditArgs) -> str:
        return f"edit {args.path}"
