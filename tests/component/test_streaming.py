"""Streamed answers: the real `openai` client against the fake server's server-sent events
assembles exactly what the same answer gives unstreamed; a stream broken off is asked again
and then fails like a failed request; the runtime tells the channel what the model writes
and still posts the answer once."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis
from openai.types.chat import ChatCompletionChunk
from prometheus_client import REGISTRY

from runtime.channel import Reply, RunFinished, ToolStarted, Writing
from runtime.models import AssistantMessage, StopReason, ToolSpec, UserMessage
from runtime.providers import openai_provider
from runtime.providers.base import ProviderError, Streaming
from runtime.providers.openai_provider import BrokenStream, OpenAIProvider, StreamedAnswer
from tests import support
from tests.fake_openai import FakeOpenAI, Step, calls, error, reply
from tests.support import ALICE as ACTOR
from tests.support import HERE as CONVERSATION

TOOLS = [
    ToolSpec(name=name, description=name, parameters={"type": "object", "properties": {}})
    for name in ("read", "bash")
]
ASK = [UserMessage(content="hello")]
ANSWER = "The quick brown fox jumps over the lazy dog, then writes a report about it."


def provider(fake: FakeOpenAI, stream: bool = True, max_retries: int = 0) -> OpenAIProvider:
    return OpenAIProvider(
        "fake-model",
        api_key="sk-test",
        base_url=fake.base_url,
        max_retries=max_retries,
        stream=stream,
    )


class Texts:
    """What `on_text` was told."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, text: str) -> None:
        self.seen.append(text)


async def both_ways(
    fake: FakeOpenAI, step: Step
) -> tuple[AssistantMessage, AssistantMessage, Texts]:
    """The same scripted answer unstreamed, then streamed."""
    fake.script = [step, step]
    plain = await provider(fake, stream=False).complete(ASK, TOOLS)
    texts = Texts()
    streamed = await provider(fake).complete_streaming(ASK, TOOLS, texts)
    return plain, streamed, texts


async def test_streamed_text_is_the_same_answer_told_as_it_grows(fake_openai: FakeOpenAI) -> None:
    step = reply(ANSWER)
    step.chunks = 8
    plain, streamed, texts = await both_ways(fake_openai, step)
    assert streamed == plain == AssistantMessage(content=ANSWER)
    assert len(texts.seen) == 8 and texts.seen[-1] == ANSWER
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(texts.seen))
    first, second = fake_openai.requests
    assert "stream" not in first
    assert second["stream"] is True and second["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in second.items() if not k.startswith("stream")} == first


async def test_streamed_tool_calls_assemble_exactly(fake_openai: FakeOpenAI) -> None:
    step = calls(
        ("call_a", "read", {"path": "docs/notes — é.txt", "limit": 40}),
        ("call_b", "bash", '{"command": "grep -n \\"x\\" a.txt | head -3"}'),
        content="Let me look.",
    )
    step.chunks, step.interleave = 5, True  # arguments in 5 pieces, the two calls mixed
    plain, streamed, texts = await both_ways(fake_openai, step)
    assert streamed == plain
    assert [c.id for c in streamed.tool_calls] == ["call_a", "call_b"]
    assert [c.name for c in streamed.tool_calls] == ["read", "bash"]
    assert streamed.tool_calls[1].arguments == '{"command": "grep -n \\"x\\" a.txt | head -3"}'
    assert streamed.content == "Let me look." and texts.seen[-1] == "Let me look."


async def test_tool_calls_without_text_tell_nothing(fake_openai: FakeOpenAI) -> None:
    step = calls(("call_1", "read", "{not json"), ("call_2", "bash", ""))
    plain, streamed, texts = await both_ways(fake_openai, step)
    assert streamed == plain
    assert [c.arguments for c in streamed.tool_calls] == ["{not json", "{}"]
    assert streamed.content is None and texts.seen == []


def test_chunks_with_parts_left_out_count_as_empty() -> None:
    head: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 0}
    answer = StreamedAnswer()
    rest: dict[str, Any]
    for rest in (
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"choices": [{"index": 1, "delta": {"content": " other"}}]},  # another choice
        {"choices": [{"index": 0, "finish_reason": "stop"}]},  # no delta
        {"usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},  # no choices
    ):
        answer.add(ChatCompletionChunk.model_construct(**head, **rest))
    assert answer.finished and answer.usage is not None and answer.usage.completion_tokens == 2
    assert answer.message() == AssistantMessage(content="Hi")


async def test_streamed_usage_is_counted(fake_openai: FakeOpenAI) -> None:
    def tokens() -> float:
        labels = {"provider": "openai:fake-model", "kind": "completion"}
        return REGISTRY.get_sample_value("clawgate_llm_tokens_total", labels) or 0.0

    before = tokens()
    fake_openai.script = [reply("hi")]
    await provider(fake_openai).complete_streaming(ASK, [], Texts())
    assert tokens() == before + 5
    assert "tools" not in fake_openai.requests[0]


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_provider, "STREAM_RETRY_DELAY", 0.01)


@pytest.mark.usefixtures("quick_retries")
@pytest.mark.parametrize("clean", [False, True], ids=["connection dropped", "body ended early"])
async def test_a_stream_broken_off_is_asked_again(fake_openai: FakeOpenAI, clean: bool) -> None:
    broken = reply(ANSWER)
    broken.chunks, broken.cut_after, broken.cut_clean = 8, 4, clean
    fake_openai.script = [broken, reply(ANSWER)]
    texts = Texts()
    answer = await provider(fake_openai, max_retries=1).complete_streaming(ASK, TOOLS, texts)
    assert answer == AssistantMessage(content=ANSWER)
    assert len(fake_openai.requests) == 2
    assert texts.seen[-1] == ANSWER  # the preview started over with the second stream


@pytest.mark.usefixtures("quick_retries")
@pytest.mark.parametrize("clean", [False, True], ids=["connection dropped", "body ended early"])
async def test_a_stream_that_keeps_breaking_fails_like_a_failed_request(
    fake_openai: FakeOpenAI, clean: bool
) -> None:
    broken = calls(("call_1", "read", {"path": "a.txt"}))
    broken.chunks, broken.cut_after, broken.cut_clean = 6, 3, clean
    fake_openai.script = [broken, broken]
    with pytest.raises(ProviderError, match="broke off mid-way") as raised:
        await provider(fake_openai, max_retries=1).complete_streaming(ASK, TOOLS, Texts())
    assert len(fake_openai.requests) == 2  # asked again once, as the client retries a request
    broke = raised.value.__cause__
    assert isinstance(broke, BrokenStream)
    if clean:  # no error on the wire: the answer simply never finished
        assert broke.__cause__ is None
    else:
        assert isinstance(broke.__cause__, openai.APIConnectionError)


async def test_a_refused_streaming_request_fails_as_before(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [error(500)]
    with pytest.raises(ProviderError, match="HTTP 500"):
        await provider(fake_openai).complete_streaming(ASK, TOOLS, Texts())
    assert len(fake_openai.requests) == 1


async def test_streaming_off_asks_once_without_streaming(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [reply(ANSWER)]
    texts = Texts()
    answer = await provider(fake_openai, stream=False).complete_streaming(ASK, TOOLS, texts)
    assert answer.content == ANSWER and texts.seen == []
    assert "stream" not in fake_openai.requests[0]
    assert isinstance(provider(fake_openai), Streaming)


# --- through the runtime -----------------------------------------------------------------------


def events(channel: support.RecordingChannel) -> list[Any]:
    return [e for _, e in channel.events]


async def test_the_runtime_tells_what_is_written_and_answers_once(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("alpha\n")
    first = calls(("call_1", "read", {"path": "a.txt"}), content="Reading a.txt.")
    answer = reply(ANSWER)
    answer.chunks = 6
    fake_openai.script = [first, answer]
    runtime, channel = support.make_runtime(redis, workdir, provider(fake_openai))
    runtime.channel.interval = 0.0  # every piece passed on (the fake writes them at once)
    result = await runtime.run("st1", "read it", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.FINAL and result.final_text == ANSWER
    seen = events(channel)
    replies = [e for e in seen if isinstance(e, Reply)]
    assert [r.text for r in replies] == ["Reading a.txt.", ANSWER]
    assert replies[-1].key  # the final answer keeps its idempotency key
    written = [e.text for e in seen if isinstance(e, Writing)]
    # Each preview is the text so far up to its last space (the word being written may be
    # the start of a secret): the first piece, "Readi", shows nothing yet.
    assert written[0] == "" and "Reading " in written
    assert written[-1] == ANSWER[: ANSWER.rfind(" ") + 1]
    # The answer's pieces come after the tool ran, and before the answer itself.
    started = next(i for i, e in enumerate(seen) if isinstance(e, ToolStarted))
    pieces = [i for i, e in enumerate(seen) if isinstance(e, Writing) and e.text.startswith("The")]
    assert len(pieces) == 6 and started < pieces[0] and pieces[-1] < seen.index(replies[-1])
    assert isinstance(seen[-1], RunFinished)


async def test_a_broken_stream_ends_the_run_like_a_failed_request(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    broken = reply(ANSWER)
    broken.chunks, broken.cut_after = 8, 5
    fake_openai.script = [broken]
    runtime, channel = support.make_runtime(redis, workdir, provider(fake_openai))
    result = await runtime.run("st2", "hello", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.ERROR
    (message,) = channel.of(Reply)
    assert message.text.startswith("Sorry, I could not get an answer from the model")
    assert "broke off mid-way" in message.text
    finished = channel.of(RunFinished)
    assert finished[-1].stop_reason is StopReason.ERROR
    assert await runtime.history.length("st2") == 1  # only the user's message
