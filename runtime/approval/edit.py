"""Approve with edit: an approver changes the arguments of a pending call, then approves it.
The edited call is validated by its tool and judged again (the tool policy and the risk
policy: a deny still wins; the N-person rule is counted anew, and never needs fewer
approvers than the original call did), bound to its new hash in the
same script that records the edit (so an edit of an approval decided meanwhile is refused),
audited with the diff, and the model is told the call ran with the approver's edits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from runtime.approval.always import cover_of
from runtime.approval.models import ApprovalRecord, Checkpoint, checkpoint_call_hash
from runtime.approval.notices import transition_message
from runtime.approval.store import ApprovalStore
from runtime.canonical import canonical_arguments, strip_markers
from runtime.json_bounded import TooDeep, loads_bounded
from runtime.models import Actor, ToolCall
from runtime.policy.resolve import EffectivePolicy
from runtime.policy.service import PolicyService
from runtime.redact import MASK, one_line, redact_text
from runtime.risk.policy import Verdict
from runtime.tools.registry import ToolRegistry

DIFF_CHARS = 300  # of each value shown in a diff
MAX_EDIT_DEPTH = 32  # nesting of edited arguments: deeper is refused before parsing


@dataclass(frozen=True, slots=True)
class Edited:
    record: ApprovalRecord
    checkpoint: Checkpoint
    diff: str


def diff(old: dict[str, object], new: dict[str, object]) -> str:
    """`command: "rm -rf build" -> "rm -rf build/tmp"; force: removed`, redacted."""

    def shown(value: object) -> str:
        return one_line(redact_text(json.dumps(value, ensure_ascii=False)), DIFF_CHARS)

    parts = []
    for key in sorted({*old, *new}):
        if key not in new:
            parts.append(f"{key}: removed")
        elif key not in old:
            parts.append(f"{key}: added {shown(new[key])}")
        elif old[key] != new[key]:
            parts.append(f"{key}: {shown(old[key])} -> {shown(new[key])}")
    return "; ".join(parts) or "no change"


class CallEditor:
    def __init__(
        self,
        approvals: ApprovalStore,
        policies: PolicyService,
        registry: ToolRegistry,
        workdir: Path,
    ) -> None:
        self.approvals = approvals
        self.policies = policies
        self.registry = registry
        self.workdir = workdir

    async def edit(
        self,
        record: ApprovalRecord,
        checkpoint: Checkpoint,
        arguments: str,
        actor: Actor,
        policy: EffectivePolicy,
    ) -> Edited | str:
        """The approval with its call edited (recorded in Redis), or why not."""
        tool = self.registry.resolve(record.tool)
        if tool is None or policy.verdict(record.tool).state in ("deny", "off"):
            return f"the {record.tool} tool is not allowed here any more"
        try:
            raw = loads_bounded(arguments, MAX_EDIT_DEPTH)
        except TooDeep as exc:
            return f"the edited arguments are {exc}"
        except json.JSONDecodeError as exc:
            return f"the edited arguments are not valid JSON: {exc.msg}"
        if not isinstance(raw, dict):
            return "the edited arguments must be a JSON object"
        if json.dumps(raw).count(MASK) > record.arguments.count(MASK):
            # Copied from a notice, where secrets are masked: it would run with the mask.
            return f"the edited arguments hold {MASK} where the call had a secret: type it whole"
        try:
            args = tool.args_model.model_validate(strip_markers(raw))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return f"the edited arguments are invalid for {record.tool}: {problems}"
        values = args.model_dump(mode="json", exclude_unset=True)
        risk = self.policies.risk_policy(policy.risk)
        judged = tool.judge(values, risk.safe_tools) or risk.assess(
            record.tool, values, self.workdir
        )
        if judged.verdict is Verdict.DENY:
            return "the edited call is refused by the risk policy: " + "; ".join(judged.reasons)
        old = checkpoint.calls[checkpoint.index]
        call = ToolCall(id=old.id, name=old.name, arguments=json.dumps(values, ensure_ascii=False))
        calls = list(checkpoint.calls)
        calls[checkpoint.index] = call
        change = diff(json.loads(record.arguments), json.loads(canonical_arguments(call)))
        edited_checkpoint = checkpoint.model_copy(update={"calls": calls, "edit": change})
        canonical = canonical_arguments(call)
        reasons = list(judged.reasons) or ["edited by an approver"]
        always, no_always = cover_of(record.tool, tool, policy)
        edited = record.model_copy(
            update={
                "arguments": canonical,
                "call_hash": checkpoint_call_hash(edited_checkpoint, canonical),
                "reasons": reasons,
                # Never fewer approvers than the original needed (an edit into a call of a
                # lower quorum would let one approver pass a two-person rule), counted afresh.
                "quorum": max(record.quorum, policy.quorum(record.tool, reasons)),
                "approved_by": [],
                "signature": tool.signature,  # what it runs with
                "always": always,
                "no_always": no_always,
            }
        )
        written = await self.approvals.edit(record, edited, edited_checkpoint, actor.key, change)
        if not written.ok:
            return transition_message(record.id, written)
        return Edited(edited, edited_checkpoint, change)
