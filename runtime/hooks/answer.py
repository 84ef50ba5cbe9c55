"""What a hook answers: `allow`, `deny` or `ask`, alone or as an object with a reason, a
quorum and routes; bare or in OPA's `{"result": ...}` envelope."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from runtime.policy.model import MAX_QUORUM, check_routes
from runtime.redact import one_line, redact_text

Decision = Literal["allow", "ask", "deny"]
MAX_REASON = 300  # characters of a hook's reason kept (it reaches notices and the audit)


class HookFailure(Exception):
    """A hook that gave no usable answer; the text says why, for the notice and the audit."""


class HookAnswer(BaseModel):
    # Other keys are the hook's own business (an OPA policy may return more).
    model_config = ConfigDict(extra="ignore", frozen=True)

    decision: Decision
    reason: str = ""
    quorum: int = Field(1, ge=1, le=MAX_QUORUM)  # approvers an ask needs at least
    route: Annotated[list[str], AfterValidator(check_routes)] = Field(default_factory=list)

    def shown_reason(self) -> str:
        """The reason as people may see it: one line, capped, secrets masked."""
        return one_line(redact_text(self.reason), MAX_REASON)


def parse_answer(body: bytes) -> HookAnswer:
    """The hook's answer in `body`; raises `HookFailure` for anything else."""
    try:
        value: Any = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise HookFailure(f"answered no JSON ({_glimpse(body)})") from None
    if isinstance(value, dict) and "decision" not in value:
        if "result" not in value:
            # OPA answers `{}` when the rule is undefined for this input.
            raise HookFailure("answered without a decision or a result")
        value = value["result"]
    if isinstance(value, str):
        value = {"decision": value}
    if not isinstance(value, dict):
        raise HookFailure(f"answered {one_line(json.dumps(value), 60)}, not a decision")
    try:
        return HookAnswer.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()
        )
        raise HookFailure(f"answered something malformed ({one_line(problems, 200)})") from None


def _glimpse(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    return repr(one_line(redact_text(text), 60)) if text else "nothing"
