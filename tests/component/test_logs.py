"""Logs: text as before, JSON lines when asked, and no secrets in either."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.logs import configure_logging, make_handler
from bot.settings import Settings
from runtime.redact import MASK
from tests.processes import chat, clean_env

SLACK_BOT = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_USER = "xoxp-1111-2222-3333-abcdefabcdef"
SLACK_APP = "xapp-1-A0123456789-1234567890-deadbeefcafe"
OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl"
PLAIN = "hunter2-plain-value"

ISO_MS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"  # text lines start with it (UTC)

SECRETS = [SLACK_BOT, SLACK_USER, SLACK_APP, OPENAI_KEY, BEARER, PLAIN]


def _logger(fmt: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    log = logging.getLogger(f"clawgate.test.{fmt}")
    log.handlers[:] = [make_handler(fmt, stream)]
    log.propagate = False
    log.setLevel(logging.DEBUG)
    return log, stream


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    log, stream = _logger("json")
    yield log, stream
    log.handlers.clear()


@pytest.fixture
def text_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    log, stream = _logger("text")
    yield log, stream
    log.handlers.clear()


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
    assert MASK in text


# A message carrying every kind of secret the logs must hide.
LEAKY = (
    f"slack {SLACK_BOT} user {SLACK_USER} app {SLACK_APP} openai {OPENAI_KEY} "
    f"Authorization: Bearer {BEARER} auth header Authorization: {PLAIN} "
    f"token={PLAIN} client_secret: {PLAIN} PASSWORD='{PLAIN}' my_api_key={PLAIN} "
    f'json {{"api_key": "{PLAIN}", "Token": "{PLAIN}", "authorization": "{PLAIN}"}} '
    f"repr {{'password': '{PLAIN}'}} proxy_authorization={PLAIN}"
)


def test_json_lines_parse_and_carry_the_fields(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = json_log
    log.info("hello %s", "world", extra={"session": "console:local", "steps": 3})
    log.warning("not json-able extra", extra={"obj": object(), "ok": [1, "two"]})
    first, second = _lines(stream)
    assert first["message"] == "hello world"
    assert first["level"] == "INFO"
    assert first["logger"] == "clawgate.test.json"
    assert re.fullmatch(ISO_MS, first["ts"])
    assert first["session"] == "console:local" and first["steps"] == 3
    assert "exc" not in first
    assert second["level"] == "WARNING" and second["ok"] == [1, "two"]
    assert "obj" not in second


def test_json_carries_the_traceback(json_log: tuple[logging.Logger, io.StringIO]) -> None:
    log, stream = json_log
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("it failed")
    (entry,) = _lines(stream)
    assert entry["level"] == "ERROR" and entry["message"] == "it failed"
    assert entry["exc"].startswith("Traceback (most recent call last):")
    assert "RuntimeError: boom" in entry["exc"]


def test_secrets_are_masked_in_json_message_traceback_and_extras(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = json_log
    try:
        raise ValueError(LEAKY)
    except ValueError:
        log.exception("request failed: %s", LEAKY, extra={"api_token": PLAIN, "note": LEAKY})
    raw = stream.getvalue()
    for secret in SECRETS:
        assert secret not in raw
    (entry,) = _lines(stream)
    _assert_clean(entry["message"])
    _assert_clean(entry["exc"])
    assert entry["api_token"] == MASK
    _assert_clean(entry["note"])
    # What is around the secrets survives.
    assert "token=[redacted]" in entry["message"]
    assert '"api_key": "[redacted]"' in entry["message"]
    assert "Authorization: [redacted]" in entry["message"]
    assert entry["message"].startswith("request failed: slack [redacted] user [redacted]")


def test_secrets_are_masked_in_text_message_and_traceback(
    text_log: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = text_log
    try:
        raise ValueError(LEAKY)
    except ValueError:
        log.exception(LEAKY)
    out = stream.getvalue()
    _assert_clean(out)
    assert re.match(rf"{ISO_MS} ERROR clawgate.test.text: slack \[redacted\]", out)
    assert "Traceback (most recent call last):" in out
    assert "ValueError: slack [redacted]" in out


def test_text_lines_are_timestamped_and_otherwise_as_logged(
    text_log: tuple[logging.Logger, io.StringIO],
) -> None:
    log, stream = text_log
    log.warning("worker %s took %d inputs from %s", "w-1", 4, "lane-a")
    log.info("plain message with: colons = and equals")
    first, second = stream.getvalue().splitlines()
    assert re.fullmatch(
        rf"{ISO_MS} WARNING clawgate.test.text: worker w-1 took 4 inputs from lane-a", first
    )
    assert re.fullmatch(
        rf"{ISO_MS} INFO clawgate.test.text: plain message with: colons = and equals", second
    )


def test_configured_secrets_do_not_reach_the_logs(
    tmp_path: Path, json_log: tuple[logging.Logger, io.StringIO]
) -> None:
    settings = Settings(
        SLACK_BOT_TOKEN=SLACK_BOT,
        SLACK_SIGNING_SECRET=PLAIN,
        SLACK_APP_TOKEN=SLACK_APP,
        OPENAI_API_KEY=OPENAI_KEY,
        CLAWGATE_WORKDIR=str(tmp_path),
    )
    assert settings.slack_bot_token is not None and settings.slack_app_token is not None
    log, stream = json_log
    log.info("settings: %s", settings)  # SecretStr hides them by itself
    log.info("calling slack with %s", settings.slack_bot_token.get_secret_value())
    log.info("socket mode %s", settings.slack_app_token.get_secret_value())
    log.info("openai key %s", OPENAI_KEY)
    raw = stream.getvalue()
    for secret in (SLACK_BOT, SLACK_APP, OPENAI_KEY, PLAIN):
        assert secret not in raw
    messages = [entry["message"] for entry in _lines(stream)]
    assert messages[1:] == [
        "calling slack with [redacted]",
        "socket mode [redacted]",
        "openai key [redacted]",
    ]


def test_configure_logging_installs_once_on_the_root_logger() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    root.handlers.clear()
    stream, other = io.StringIO(), io.StringIO()
    try:
        configure_logging("INFO", "json", stream)
        configure_logging("DEBUG", "text", other)  # already configured: no-op
        logging.getLogger("clawgate.test.root").debug("dropped")
        logging.getLogger("clawgate.test.root").info("kept %s", SLACK_BOT)
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    (entry,) = _lines(stream)
    assert entry["message"] == "kept [redacted]" and entry["logger"] == "clawgate.test.root"
    assert other.getvalue() == ""


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log format"):
        make_handler("xml", io.StringIO())


async def test_invalid_log_format_is_a_settings_error(workdir: Path) -> None:
    code, _, err = await chat("", workdir, clean_env(CLAWGATE_LOG_FORMAT="xml"), "chat")
    assert code == 2
    assert "CLAWGATE_LOG_FORMAT" in err


def test_a_record_that_cannot_be_formatted_never_breaks_the_caller() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("clawgate.test.badformat")
    handler = make_handler("text", stream)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("%(a)s", {"b": 1})  # KeyError inside getMessage
        logger.warning("still logging")
    finally:
        logger.removeHandler(handler)
    assert "still logging" in stream.getvalue()


def test_redis_url_passwords_are_masked_also_without_a_user() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("clawgate.test.redisurl")
    handler = make_handler("text", stream)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("cannot reach redis://:s3cret-pw@redis:6379/0 or redis://u:pw2@h/1")
    finally:
        logger.removeHandler(handler)
    assert "s3cret-pw" not in stream.getvalue() and "pw2" not in stream.getvalue()
