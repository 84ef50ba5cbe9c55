"""What the chat is told when the model's answer is not a plain, whole answer: a refusal in
its own words, an answer stopped by the output token limit or a content filter, and model
server failures in one line with what to do. The real `openai` client against the local
fake server, streamed and not; history in a real Redis."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from runtime.channel import Reply, ToolStarted
from runtime.providers.openai_provider import OpenAIProvider
from tests import support
from tests.fake_openai import FakeOpenAI, Step, error
from tests.support import ALICE, HERE

STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


async def ask(
    redis: aioredis.Redis, workdir: Path, fake: FakeOpenAI, *steps: Step, stream: bool = False
) -> tuple[str, str | None, support.RecordingChannel]:
    """The last reply the chat got for one message, the run's error, and the channel."""
    fake.script = list(steps)
    provider = OpenAIProvider(
        "fake-model", api_key="sk-test", base_url=fake.base_url, max_retries=0, stream=stream
    )
    runtime, channel = support.make_runtime(redis, workdir, provider)
    result = await runtime.run("s1", "hello", ALICE, HERE)
    return channel.of(Reply)[-1].text, result.error, channel


@STREAMED
async def test_a_refusal_is_shown_in_the_models_words(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, stream: bool
) -> None:
    said, _, _ = await ask(
        redis, workdir, fake_openai, Step(refusal="I can't help with that."), stream=stream
    )
    assert said == "I can't help with that."


@STREAMED
async def test_an_answer_cut_by_the_token_limit_says_so(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, stream: bool
) -> None:
    step = Step(content="The three steps are: first", finish="length")
    said, _, _ = await ask(redis, workdir, fake_openai, step, stream=stream)
    assert said == (
        "The three steps are: first\n\n"
        "[The answer was stopped here by the model's output token limit.]"
    )


async def test_an_answer_stopped_by_a_content_filter_says_so(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    said, _, _ = await ask(redis, workdir, fake_openai, Step(finish="content_filter"))
    assert said == "[The answer was stopped here by the model server's content filter.]"


@STREAMED
async def test_tool_calls_of_a_cut_answer_never_run(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, stream: bool
) -> None:
    cut = Step(tool_calls=[("c1", "bash", '{"command": "echo hi >> log"}')], finish="length")
    said, error_text, channel = await ask(redis, workdir, fake_openai, cut, stream=stream)
    assert not channel.of(ToolStarted) and not (workdir / "log").exists()
    assert said == (
        "Sorry, I could not get an answer from the model: the model's answer was stopped by "
        "the model's output token limit before its tool calls were complete; none of them was "
        "run."
    )
    assert error_text is not None and "none of them was run" in error_text


@pytest.mark.parametrize(
    ("step", "told"),
    [
        (
            error(400, "This model's maximum context length is 8192 tokens.", None),
            "the conversation is longer than the model's context window (HTTP 400: This "
            "model's maximum context length is 8192 tokens.); start a new thread, or lower "
            "CLAWGATE_CONTEXT_BUDGET",
        ),
        (
            error(400, "Invalid 'tools[0].function.name': string too long."),
            "the model server refused the request (HTTP 400: Invalid "
            "'tools[0].function.name': string too long.)",
        ),
        (
            error(401, "Incorrect API key provided: sk-test."),
            "the model server refused the API key (HTTP 401: Incorrect API key provided: "
            "sk-test.); check OPENAI_API_KEY",
        ),
        (
            error(404, "The model `fake-model` does not exist.", "model_not_found"),
            "the model server does not serve the model fake-model (HTTP 404: The model "
            "`fake-model` does not exist.); check CLAWGATE_MODEL and OPENAI_BASE_URL "
            "(`clawgate doctor` lists the models it serves)",
        ),
        (
            error(429, "You exceeded your current quota.", "insufficient_quota"),
            "the model account is out of quota (HTTP 429: You exceeded your current quota.); "
            "check its plan and billing",
        ),
        (
            error(429, "Rate limit reached for requests."),
            "the model server is rate limiting us (HTTP 429: Rate limit reached for "
            "requests.); try again shortly",
        ),
        (
            error(503, "The engine is currently overloaded.\nPlease try again later."),
            "the model server failed (HTTP 503: The engine is currently overloaded. Please "
            "try again later.); try again shortly",
        ),
    ],
    ids=["context", "400", "401", "404", "quota", "429", "503"],
)
async def test_a_model_server_failure_is_one_line_with_what_to_do(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, step: Step, told: str
) -> None:
    said, error_text, _ = await ask(redis, workdir, fake_openai, step)
    assert said == f"Sorry, I could not get an answer from the model: {told}."
    assert error_text == told and "\n" not in said


async def test_a_long_or_secret_failure_reason_is_cut_and_redacted(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    step = error(400, f"bad header {token} " + "x" * 500)
    said, _, _ = await ask(redis, workdir, fake_openai, step)
    assert token not in said and "[redacted]" in said
    reason = said.split("(HTTP 400: ", 1)[1].split(")", 1)[0]
    assert len(reason) == 200 and reason.endswith("…")


@STREAMED
async def test_a_plain_answer_is_not_marked(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, stream: bool
) -> None:
    said, error_text, _ = await ask(
        redis, workdir, fake_openai, Step(content="All good."), stream=stream
    )
    assert said == "All good." and error_text is None


async def test_a_message_over_the_size_limit_is_not_sent_to_the_model(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    provider = OpenAIProvider("fake-model", api_key="sk-test", base_url=fake_openai.base_url)
    runtime, _ = support.make_runtime(redis, workdir, provider)
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    huge = "x" * 2_000_000
    assert await dispatch(runtime, "s1", huge, ALICE, HERE, say) is None
    assert said == [
        "That message is 2,000,000 characters long; the limit here is 100,000 "
        "(CLAWGATE_MAX_MESSAGE_CHARS). Nothing was run: send a shorter one, or attach the text "
        "as a file."
    ]
    assert fake_openai.requests == [] and await runtime.history.load("s1") == []
