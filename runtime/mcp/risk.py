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


def judge(
    tool: str, server: str, listing: Listed, rules: ServerRules, safe_tools: frozenset[str]
) -> RiskDecision:
    """`tool`: the qualified name (`github.create_issue`); `listing`: the tool as listed."""
    which = f"{tool} (MCP server {server}, tool signature {listing.signature})"
    if listing.name in rules.no_approval or tool in safe_tools:
        return RiskDecision(Verdict.ALLOW, ())  # an admin named this very tool
    if rules.trust_annotations and listing.destructive is True:
        return RiskDecision(Verdict.ASK, (f"{which}: the server marks it destructive",))
    if WILDCARD in rules.no_approval or server_wildcard(tool) in safe_tools:
        return RiskDecision(Verdict.ALLOW, ())
    if rules.trust_annotations and listing.read_only is True:
        return RiskDecision(Verdict.ALLOW, ())
    return RiskDecision(Verdict.ASK, (f"{which}: an MCP tool asks for approval by default",))


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
