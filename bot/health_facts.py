"""The console's Health page as this process sees it: the facts Redis holds (runtime/health.py)
and those only the process knows: its role, its sandbox, its MCP servers, whether it is
ready (/readyz) and whether the model answers (`clawgate doctor`'s probe, cached)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Literal

from bot.doctor import Check, model_check
from bot.server import Service
from bot.settings import Settings
from runtime.health import HealthReport, ModelFact, ProcessFact, QueueFacts, queue_facts
from runtime.redact import redact_text
from runtime.store.connection import REDIS_DOWN

MODEL_TIMEOUT = 2.0  # seconds the model's provider gets to answer for the page
MODEL_CACHE = 30.0  # seconds an answer is reused: refreshing the page does not ask again
FACTS_TIMEOUT = 2.0  # seconds Redis gets to answer the page's questions
DEMO_MODEL = "offline demo model"
UNANSWERED: tuple[type[Exception], ...] = (*REDIS_DOWN, TimeoutError)


class ModelReachability:
    """Whether the default model answers, asked at most once per `cache_s` however often
    (and however many pages at once) ask."""

    def __init__(
        self,
        settings: Settings,
        cache_s: float = MODEL_CACHE,
        timeout_s: float = MODEL_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.cache_s = cache_s
        self.timeout_s = timeout_s
        self.clock = clock
        self._answer: tuple[float, Check] | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> ModelFact:
        async with self._lock:  # pages asking together share one probe
            if self._answer is None or self.clock() - self._answer[0] >= self.cache_s:
                self._answer = (self.clock(), await self._check())
            at, check = self._answer
        name = DEMO_MODEL if self.settings.uses_demo_model else self.settings.model
        return ModelFact(name, check.ok, redact_text(check.detail), self.clock() - at)

    async def _check(self) -> Check:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await model_check(self.settings)
        except TimeoutError:
            return Check("model", False, f"did not answer within {self.timeout_s:g} s")


async def gather(
    service: Service, model: ModelReachability, role: Literal["serve", "worker"] = "serve"
) -> HealthReport:
    """Everything the Health page shows, within a few seconds whatever Redis or the model's
    provider do."""
    problems, model_fact, queue = await asyncio.gather(service.ready(), model(), _queue(service))
    if queue is None and not problems:
        problems = [f"redis did not answer the health questions within {FACTS_TIMEOUT:g} s"]
    worker, child = service.worker, service.worker_child
    process = ProcessFact(
        role=role,
        worker_id=None if worker is None else worker.consumer,
        worker_polling=None if worker is None else worker.polling(),
        sandbox=service.sandbox.describe(),
        sandbox_warning=service.sandbox.missing,
        child_worker_pid=child.pid if child is not None and child.running else None,
    )
    # A server's detail may quote its failure, URL and all.
    states = service.mcp.states() if service.mcp is not None else []
    mcp = [dataclasses.replace(s, detail=redact_text(s.detail)) for s in states]
    return HealthReport(process, problems, list(service.warnings), queue, mcp, model_fact)


async def _queue(service: Service) -> QueueFacts | None:
    try:
        async with asyncio.timeout(FACTS_TIMEOUT):
            return await queue_facts(service.inbox)
    except UNANSWERED:
        return None
