"""Tool outputs too long for the model, kept whole in the work dir where the `read` tool
finds them: `.clawgate/outputs/<session>/<call>.txt`. What is kept is redacted: the work dir
is readable by every command the judge lets run unasked (the sandbox masks secret file
names, not what a file holds), so a secret a tool printed must not be written there in clear.
Written through `safe_open` (no symlink followed, the directories made as it goes), so a link
planted under `.clawgate/` cannot send the write elsewhere."""

from __future__ import annotations

import hashlib
import logging
from functools import partial
from pathlib import Path

from runtime.attachments import stored_name
from runtime.redact import redact_text
from runtime.tools.safe_open import Intent, off_loop, opened, replace_all

log = logging.getLogger(__name__)

FOLDER = Path(".clawgate") / "outputs"


def session_folder(session: str) -> Path:
    """The folder of one session's outputs, relative to the work dir: its id made one file
    name, with a hash of it so that ids differing only in unsafe characters stay apart."""
    digest = hashlib.sha256(session.encode()).hexdigest()[:8]
    return FOLDER / f"{stored_name(session)}-{digest}"


def output_path(session: str, call_id: str) -> Path:
    return session_folder(session) / f"{stored_name(call_id)}.txt"


def _write(workdir: Path, relative: Path, text: str) -> None:
    root = workdir.resolve()
    with opened(root, root / relative, Intent.WRITE) as fd:
        replace_all(fd, redact_text(text).encode("utf-8", errors="replace"))


async def keep(workdir: Path, session: str, call_id: str, text: str) -> str | None:
    """Write `text` (redacted) as the call's output file: its path relative to the work dir,
    or None when it could not be written (logged; the model is then told only of the cut)."""
    relative = output_path(session, call_id)
    try:
        await off_loop(partial(_write, workdir, relative, text), "keep output")
    except Exception as exc:  # the call has run: keeping its output must not fail it
        log.warning("session %s: a long tool output was not kept: %s", session, exc)
        return None
    return relative.as_posix()
