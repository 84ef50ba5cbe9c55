"""send_file: a work-dir file posted to the run's conversation, for everyone there to
download. An export, judged as one (runtime/risk/exports.py): secrets never leave, content
that may be one asks first; opened like every file tool's file (runtime/tools/safe_open.py:
confined to the work dir, no symlink followed out, no hard link, a regular file only)."""

from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path, PurePosixPath

from pydantic import Field

from runtime.channel import FileShared
from runtime.risk.exports import content_risk
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from runtime.tools.files import judged
from runtime.tools.safe_open import Intent, off_loop, opened, read_all
from runtime.tools.sandbox import Access

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
MAX_TITLE = 200


class SendFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the work directory.")
    title: str = Field(
        "",
        max_length=MAX_TITLE,
        description="What the file is, shown with it in the chat (default: its name).",
    )


def _read(root: Path, path: Path, shown: str, limit: int) -> tuple[bytes, str | None]:
    """The file's bytes, and why posting them needs a human (`content_risk`)."""
    with opened(root, path, Intent.READ) as fd:
        data = read_all(fd, limit + 1)
    if len(data) > limit:
        raise ToolError(
            f"{shown} is larger than the {limit} bytes a file sent may be "
            "(CLAWGATE_SEND_FILE_MAX_BYTES); it was not posted"
        )
    return data, content_risk(data)


class SendFileTool(Tool[SendFileArgs]):
    name = "send_file"
    description = (
        "Post a file from the work directory to this conversation, where everyone in it can "
        "download it (an export: secret files are refused, others may need approval)."
    )
    args_model = SendFileArgs
    keyed = True  # the channel posts a call's file once (FileShared.key, .again)

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes

    async def run(self, args: SendFileArgs, ctx: ToolContext) -> ToolOutput:
        if ctx.post is None:
            raise ToolError("there is no conversation to post a file to here")
        path, shown = judged(ctx, args.path, change=False)
        read = partial(_read, ctx.workdir.resolve(), path, shown, self.max_bytes)
        data, risk = await off_loop(read, f"send_file {shown}")
        if risk is not None and ctx.access is not Access.APPROVED:
            # The judge read it without that finding: it changed since.
            raise ToolError(f"{shown} changed since the call was checked ({risk}); not posted")
        name = PurePosixPath(shown).name
        title = args.title.strip() or name
        digest = hashlib.sha256(data).hexdigest()
        key = f"file/{ctx.session}/{ctx.call_id}"
        posted = await ctx.post(FileShared(name, data, title, shown, key, again=ctx.retaken))
        if posted is None:
            raise ToolError(
                f"{shown} could not be posted: the chat refused it or did not answer (see the "
                "server's log); check the conversation before trying again"
            )
        return ToolOutput(
            f"posted {shown} ({len(data)} bytes, sha256 {digest}) to the conversation as {title!r}",
            display=f"sent {shown} ({len(data)} bytes)",
            audit={"file_sha256": digest, "file_bytes": str(len(data))},
        )

    def summarize(self, args: SendFileArgs) -> str:
        return f"send_file {args.path}"
