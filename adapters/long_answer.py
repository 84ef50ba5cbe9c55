"""An answer too long to read as messages: its beginning as a message, saying the whole of it
is in the file posted with it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from adapters.markdown import beginning

DEFAULT_FILE_CHARS = 12_000  # CLAWGATE_ANSWER_FILE_CHARS: longer answers come as a file
HEAD_CHARS = 1_500  # of the answer, in the message that comes with the file


@dataclass(frozen=True, slots=True)
class AnswerFile:
    message: str  # the beginning of the answer and where the rest is
    name: str  # `answer-<digest>.md`, the same for the same answer (a retake finds it)
    data: bytes  # the whole answer, as written (redacted on its way, like the messages)
    title: str


def as_file(text: str, key: str, threshold: int) -> AnswerFile | None:
    """The answer as a message plus a file when it is longer than `threshold` characters
    (0: never); `key` names the answer (Reply.key), so its file is named the same again."""
    if not threshold or len(text) <= threshold:
        return None
    name = f"answer-{hashlib.sha256((key or text).encode()).hexdigest()[:12]}.md"
    note = f"_The full answer ({len(text):,} characters) is in the attached file {name}._"
    message = f"{beginning(text, HEAD_CHARS).rstrip()}\n\n{note}"
    return AnswerFile(message, name, text.encode(), "The full answer")
