"""How a runtime is set up (`Runtime(config, ...)`): its work directory, its limits, the system
prompt, the liveness time of its processes, the context budget and the loop's knobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime.context.compactor import DEFAULT_BUDGET
from runtime.loop import LoopOptions

DEFAULT_SYSTEM_PROMPT = (
    "You are clawgate, a careful engineering assistant working inside a team chat. "
    "You can use tools on the files of one work directory. Prefer reading before changing. "
    "Some tool calls need a human's approval or are denied by policy; when a call is denied or "
    "rejected, do not retry it unchanged. Answer concisely."
)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    workdir: Path
    max_steps: int = 12
    max_tool_result_chars: int = 16_000
    max_message_chars: int = 100_000  # a person's message longer than this is not run
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    liveness_ttl: float = 2.5  # seconds a silent process is presumed alive (renewed 3x as often)
    context_budget: int = DEFAULT_BUDGET  # characters of history the model is sent (compacted)
    loop: LoopOptions = field(default_factory=LoopOptions)  # runtime/loop.py
