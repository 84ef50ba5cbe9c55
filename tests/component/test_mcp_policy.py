"""MCP tools in the live policy (real Redis, no server process): admins enable them with
`/policy allow <server>.<tool>` or `<server>.*`, a channel admin in their channel too (an MCP
tool is off by default, not kept out by anyone), and the tools a catalog lists come and go."""

from __future__ import annotations

import tomllib
import uuid
from collections.abc import Sequence

import redis.asyncio as aioredis

from runtime.audit import AuditLog
from runtime.models import Actor
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyChangeError, PolicyService, PolicyUsageError
from runtime.store.keys import Keys

GLOBAL_ADMIN = Actor(platform="slack", user_id="UADMIN")
CHANNEL_ADMIN = Actor(platform="slack", user_id="UCHAN")
FILE = """
[mcp.stdio.gh]
command = ["gh-mcp"]
[conversations."slack:T1:C1".approvals]
admins = ["slack:UCHAN"]
"""


class Catalog:
    def __init__(self) -> None:
        self.listed: list[str] = ["gh.create_issue"]
        self.waited = 0

    def names(self) -> Sequence[str]:
        return self.listed

    async def settled(self) -> None:
        self.waited += 1


def service(redis: aioredis.Redis, catalog: Catalog) -> PolicyService:
    keys = Keys(f"cgmcp{uuid.uuid4().hex[:8]}")
    defaults = Defaults(enabled=("read",), admins=frozenset({GLOBAL_ADMIN.key}))
    document = PolicyDocument.model_validate(tomllib.loads(FILE))
    audit = AuditLog(redis, keys)
    return PolicyService(redis, keys, defaults, ("read",), document, audit, catalog=catalog)


async def test_admins_enable_mcp_tools_where_they_reach(redis: aioredis.Redis) -> None:
    catalog = Catalog()
    policies = service(redis, catalog)
    before = await policies.effective("slack:T1:C1")
    assert catalog.waited == 1 and "gh.create_issue" not in before.offered

    said = await policies.change("slack:T1:C1", "gh.create_issue", "allow", CHANNEL_ADMIN)
    assert "now allowed" in said
    assert "gh.create_issue" in (await policies.effective("slack:T1:C1")).offered
    assert "gh.create_issue" not in (await policies.effective("slack:T1:C2")).offered

    await policies.change("", "gh.*", "allow", GLOBAL_ADMIN)  # every tool of the server
    catalog.listed = ["gh.create_issue", "gh.search"]  # the server listed one more
    assert "gh.search" in (await policies.effective("slack:T9:C9")).offered
    await policies.change("slack:T1", "gh.*", "deny", GLOBAL_ADMIN)
    assert not {"gh.create_issue", "gh.search"} & (await policies.effective("slack:T1:C1")).offered

    for tool, error in [("nosuch.tool", PolicyUsageError), ("gh.search", PolicyChangeError)]:
        try:
            await policies.change("slack:T1:C1", tool, "allow", CHANNEL_ADMIN)
        except error:
            continue
        raise AssertionError(f"{tool}: not refused")
