"""What an "approve always" covers, decided when the call is suspended (so the notice can say
it) and applied the same way when a later call looks for a grant.

A built-in tool's grant follows its standing rule (runtime/risk/signature.py). An MCP tool's
is bound to the tool's signature and to the exact arguments approved, unless the policy says
its arguments may be generalized (`[tools] generalize_arguments`); a tool its server marks
destructive, or leaves unannotated, never gets one (runtime/mcp/risk.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from runtime.approval.models import AlwaysCover, ApprovalRecord
from runtime.canonical import canonical_json
from runtime.mcp.config import is_mcp_name
from runtime.mcp.tool import McpTool
from runtime.policy.resolve import EffectivePolicy
from runtime.redact import redact_text
from runtime.risk.signature import RULE_SEPARATOR, standing_rule
from runtime.tools.base import Tool

ARGUMENT_DIGEST_CHARS = 16
NOT_LISTED = "its MCP server does not list this tool now"
LABELS = {
    AlwaysCover.RULE: "Approve always",
    AlwaysCover.EXACT: "Approve always (these exact arguments)",
    AlwaysCover.ANY: "Approve always (any arguments)",
    AlwaysCover.NEVER: "",
}


def cover_of(
    name: str, tool: Tool[Any] | None, policy: EffectivePolicy | None
) -> tuple[AlwaysCover, str | None]:
    """What an "approve always" of a call of `name` would cover, and why none when never."""
    if not is_mcp_name(name):
        return AlwaysCover.RULE, None
    if not isinstance(tool, McpTool):
        return AlwaysCover.NEVER, NOT_LISTED
    why = tool.no_always()
    if why is not None:
        return AlwaysCover.NEVER, why
    if policy is not None and policy.generalizes(name):
        return AlwaysCover.ANY, None
    return AlwaysCover.EXACT, None


def _mcp_rule(name: str, signature: str, cover: AlwaysCover, arguments: Mapping[str, Any]) -> str:
    """`github.search\\x1fsignature:ab12…\\x1farguments:<digest>` (or `arguments:any`)."""
    if cover is AlwaysCover.ANY:
        which = "any"
    else:
        digest = hashlib.sha256(canonical_json(dict(arguments)).encode()).hexdigest()
        which = digest[:ARGUMENT_DIGEST_CHARS]
    return RULE_SEPARATOR.join([name, f"signature:{signature}", f"arguments:{which}"])


def rule_for_call(
    name: str, tool: Tool[Any], arguments: Mapping[str, Any], policy: EffectivePolicy | None
) -> str | None:
    """The grant key a call looks for (None: no grant may cover it)."""
    if not is_mcp_name(name):
        return standing_rule(name, dict(arguments))
    cover, _ = cover_of(name, tool, policy)
    if cover is AlwaysCover.NEVER or tool.signature is None:
        return None
    return _mcp_rule(name, tool.signature, cover, arguments)


def rule_for_record(record: ApprovalRecord, arguments: Mapping[str, Any]) -> str | None:
    """The grant key an "approve always" of `record` adds (None: no grant), with the cover
    the approver was shown."""
    if record.always is AlwaysCover.NEVER:
        return None
    if record.always is AlwaysCover.RULE:
        return None if is_mcp_name(record.tool) else standing_rule(record.tool, dict(arguments))
    if record.signature is None:
        return None
    return _mcp_rule(record.tool, record.signature, record.always, arguments)


def audited_rule(record: ApprovalRecord) -> str | None:
    """What an "approve always" of `record` would grant, as the audit trail records it (the
    rule's parts joined by spaces, as a grant shows it, secrets masked); None: no grant."""
    try:
        arguments = json.loads(record.arguments)
    except json.JSONDecodeError:
        return None
    if not isinstance(arguments, dict):
        return None
    rule = rule_for_record(record, arguments)
    return None if rule is None else redact_text(rule.replace(RULE_SEPARATOR, " "))
