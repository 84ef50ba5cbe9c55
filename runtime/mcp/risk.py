"""The risk of an MCP tool call: it asks by default, since clawgate cannot know what a server's
tool does. The policy lowers that for tools (or whole servers) it names: the server's
`no_approval` list, or the conversation's `[risk] safe_tools`. The server's own annotations
count only for a server an admin trusts (`trust_annotations`): readOnlyHint lowers the
default, destructiveHint raises it again over a server-wide allow, never over a tool an admin
named. Every reason names the server, the tool and its signature for people; what an approval
or an "approve always" grant is bound to is the signature itself (the approval record's field).

"Approve always" is never offered for a tool the server marks destructive or leaves
unannotated (`no_always`): what such a tool does with other arguments is anyone's guess."""

from __future__ import annotations

from runtime.mcp.config import WILDCARD, ServerRules, server_wildcard
from runtime.mcp.listing import Listed
from runtime.risk.policy import RiskDecision, Verdict

# The rules that decided, as traces name them: the server's `no_approval` list or `[risk]
# safe_tools` naming the tool; the server's annotations, trusted (`trust_annotations`).
NO_APPROVAL, ANNOTATIONS = "mcp_no_approval", "mcp_annotations"


def judge(
    tool: str, server: str, listing: Listed, rules: ServerRules, safe_tools: frozenset[str]
) -> RiskDecision:
    """`tool`: the qualified name (`github.create_issue`); `listing`: the tool as listed."""
    which = f"{tool} (MCP server {server}, tool signature {listing.signature})"
    if listing.name in rules.no_approval or tool in safe_tools:
        # an admin named this very tool
        return RiskDecision(Verdict.ALLOW, (), NO_APPROVAL, "policy_file")
    if rules.trust_annotations and listing.destructive is True:
        why = f"{which}: the server marks it destructive"
        return RiskDecision(Verdict.ASK, (why,), ANNOTATIONS, "policy_file")
    if WILDCARD in rules.no_approval or server_wildcard(tool) in safe_tools:
        return RiskDecision(Verdict.ALLOW, (), NO_APPROVAL, "policy_file")
    if rules.trust_annotations and listing.read_only is True:
        return RiskDecision(Verdict.ALLOW, (), ANNOTATIONS, "policy_file")
    why = f"{which}: an MCP tool asks for approval by default"
    return RiskDecision(Verdict.ASK, (why,), "mcp_default")


def no_always(listing: Listed) -> str | None:
    """Why no "approve always" may cover calls of this tool, or None when one may (the server
    marks it read-only or not destructive)."""
    if listing.destructive is True:
        return "the MCP server marks this tool destructive"
    if listing.read_only is True or listing.destructive is False:
        return None
    return "the MCP server does not say whether this tool is destructive"


def read_only(listing: Listed, rules: ServerRules) -> bool:
    """Whether an admin trusts the tool to change nothing: its server's `read_only` names it
    (or holds "*"), or the server is trusted (`trust_annotations`) and marks it read-only and
    not destructive."""
    if listing.name in rules.read_only or WILDCARD in rules.read_only:
        return True
    return rules.trust_annotations and listing.read_only is True and listing.destructive is not True
