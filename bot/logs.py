"""Logging for the `clawgate` command: text or JSON lines, with secrets masked in both, and
the running code's context (runtime/log_context.py: session, conversation, approval, trace,
job, worker) in each: JSON fields, or a `key=value` suffix of a text line."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, TextIO

from runtime import log_context
from runtime.redact import redact, redact_text

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CONTEXT = "log_context"  # the record attribute ContextFilter puts the context in

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
_CORE = ("ts", "level", "logger", "message", "exc", CONTEXT)


def timestamp(record: logging.LogRecord) -> str:
    """When the record was made: ISO 8601 in UTC, to the millisecond."""
    when = datetime.fromtimestamp(record.created, tz=UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ContextFilter(logging.Filter):
    """Puts the context of the code that logged (its ids, only those set) on the record;
    handlers run in the caller's task, so it is that task's context."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            setattr(record, CONTEXT, log_context.current())
        except Exception:  # never break the caller: the line goes out without its context
            setattr(record, CONTEXT, {})
        return True


def _context(record: logging.LogRecord) -> dict[str, str]:
    found = getattr(record, CONTEXT, None)
    return found if isinstance(found, dict) else {}


class RedactingFilter(logging.Filter):
    """Masks secrets in a record's message, traceback, stack and `extra=` fields, in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Never raises: a filter runs outside logging's own error handling, so a failure
        here would break the code that logged. A record it cannot mask is dropped."""
        try:
            self._mask(record)
        except Exception:
            return False
        return True

    def _mask(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)  # a bad format string: still mask what will be shown
        record.msg = redact_text(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        for key in record.__dict__.keys() - _STANDARD:
            record.__dict__[key] = redact(record.__dict__[key], key)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, exc, then `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # The context as fields; a field given with `extra=` says more and wins.
        entry.update((k, v) for k, v in _context(record).items() if k not in record.__dict__)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        exc = record.exc_text or ""
        if record.stack_info:
            exc = f"{exc}\n{self.formatStack(record.stack_info)}".lstrip("\n")
        if exc:
            entry["exc"] = exc
        for key, value in record.__dict__.items():
            if key in _STANDARD or key in _CORE:
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                continue  # not JSON: left out rather than guessed at
            entry[key] = value
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`<ISO time> LEVEL logger: message  key=value ...` (the context set), then any
    traceback."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return timestamp(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        context = _context(record)
        if not context:
            return line
        return line + "  " + " ".join(f"{k}={v}" for k, v in context.items())


def make_handler(fmt: str, stream: TextIO) -> logging.Handler:
    """A handler writing `fmt` ("text" or "json") lines to `stream`, with the context and
    secrets masked."""
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r}: expected text or json")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter())  # after: the context is masked like the rest
    return handler


def configure_logging(level: str, fmt: str, stream: TextIO) -> None:
    """Log at `level` and above to `stream` as `fmt` ("text" or "json").

    Like `logging.basicConfig`, this leaves a root logger that already has handlers alone
    (a test harness, an embedding program), so calling it twice adds nothing."""
    root = logging.getLogger()
    if root.handlers:
        return
    root.addHandler(make_handler(fmt, stream))
    root.setLevel(level)
