"""MCP tools in the live policy (real Redis, no server process): admins enable them with
`/policy allow <server>.<tool>` or `<server>.*`, a channel admin in their channel too (an MCP
tool is off by default, not kept out by anyone), and the tools a catalog lists come and go."""

from __future__ import annotations

import json
import tomllib
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import redis.asyncio as aioredis

from adapters.console.channel import render_request
from adapters.dispatch import dispatch
from adapters.feishu.cards import approval_card
from adapters.slack.blocks import approval_blocks
from runtime.audit import AuditLog
from runtime.channel import ApprovalRequested
from runtime.mcp.config import ServerRules
from runtime.mcp.listing import listed
from runtime.mcp.tool import McpTool
from runtime.models import Actor
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyChangeError, PolicyService, PolicyUsageError
from runtime.providers.demo import DemoProvider
from runtime.store.keys import Keys
from runtime.tools.files import ReadTool
from runtime.tools.registry import ToolRegistry
from tests.support import ALICE, HERE, make_runtime

GLOBAL_ADMIN = Actor(platform="slack", user_id="UADMIN")
CHANNEL_ADMIN = Actor(platform="slack", user_id="UCHAN")
CAROL = Actor(platform="slack", user_id="UCAROL")
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


# -- "approve always" of an MCP tool, through the chat commands and the real notice renderers --

GRANTS_FILE = """
[tools]
allow = ["read", "gh.*"]
generalize_arguments = ["gh.search"]
[mcp.stdio.gh]
command = ["gh-mcp"]
"""
SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}}


class FakeServer:
    """The `Server` a tool calls (no process): records the arguments of each call."""

    name = "gh"
    sandboxed = False

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    @property
    def rules(self) -> ServerRules:
        return ServerRules()

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> Any:
        self.calls.append((tool.name, arguments))
        return SimpleNamespace(content=[], structured_content={"ok": True}, is_error=False)


def mcp_tool(server: FakeServer, name: str, **hints: bool) -> McpTool:
    annotations = SimpleNamespace(
        read_only_hint=hints.get("read_only"), destructive_hint=hints.get("destructive")
    )
    listing = SimpleNamespace(
        name=name, input_schema=SCHEMA, annotations=annotations, description=name, title=None
    )
    return McpTool(server, listed(listing))


async def test_an_mcp_always_covers_the_exact_arguments_unless_generalized_and_never_a_destructive_tool(  # noqa: E501
    redis: aioredis.Redis, workdir: Path
) -> None:
    server = FakeServer()
    tools = [
        mcp_tool(server, "create", destructive=False),
        mcp_tool(server, "search", read_only=True),  # its arguments may be generalized
        mcp_tool(server, "delete", destructive=True),
        mcp_tool(server, "plain"),  # no annotations
    ]
    runtime, channel = make_runtime(
        redis,
        workdir,
        DemoProvider(),
        registry=ToolRegistry([ReadTool(), *tools]),
        document=PolicyDocument.model_validate(tomllib.loads(GRANTS_FILE)),
        approvers=[CAROL.key],
    )
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    async def call(tool: str, title: str) -> str | None:
        """The call's approval id, or None when it ran without asking."""
        text = f'call gh.{tool} {{"title": "{title}"}}'
        result = await runtime.run("s1", text, ALICE, HERE)
        return result.approval_id

    approval = await call("create", "a")
    assert approval is not None
    notice = channel.of(ApprovalRequested)[-1].notice
    assert notice.always == "Approve always (these exact arguments)"
    buttons = [b["text"]["text"] for b in approval_blocks(notice)[2]["elements"]]
    assert buttons[:2] == ["Approve once", "Approve always (these exact arguments)"]
    loaded = await runtime.approvals.load(approval)
    assert loaded is not None and loaded[0].signature == tools[0].signature  # a field
    await dispatch(runtime, "s1", f"/approve {approval} always", CAROL, HERE, say)
    assert "are now allowed in this conversation" in said[-1]
    assert await call("create", "a") is None  # the exact call: granted
    assert await call("create", "b") is not None  # other arguments ask again
    await runtime.cancel("s1", ALICE, HERE)

    approval = await call("search", "a")
    assert approval is not None
    assert channel.of(ApprovalRequested)[-1].notice.always == "Approve always (any arguments)"
    await dispatch(runtime, "s1", f"/approve {approval} always", CAROL, HERE, say)
    assert await call("search", "anything else") is None

    for tool, why in (
        ("delete", "the MCP server marks this tool destructive"),
        ("plain", "the MCP server does not say whether this tool is destructive"),
    ):
        approval = await call(tool, "a")
        assert approval is not None
        notice = channel.of(ApprovalRequested)[-1].notice
        note = f'no "approve always": {why}'
        assert notice.always == "" and notice.notes == (note,)
        buttons = [b["text"]["text"] for b in approval_blocks(notice)[2]["elements"]]
        assert buttons == ["Approve once", "Edit and approve…", "Reject"]
        assert f"*Note:* {note}" in approval_blocks(notice)[1]["text"]["text"]
        assert json.dumps(f"Note: {note}") in json.dumps(approval_card(notice))
        assert f"note: {note}" in render_request(notice)
        # "always" sent anyway (typed, or an old button): approved once, and said so.
        ran = await dispatch(runtime, "s1", f"/approve {approval} always", CAROL, HERE, say)
        assert ran is not None
        assert said[-1] == (
            f"Approval {approval} approved. No grant was added ({why}): it was approved once only."
        )
        assert await call(tool, "a") is not None  # the same call asks again
        await runtime.cancel("s1", ALICE, HERE)
    decided = [e for e in await runtime.audit.newest(100) if e.event == "approval_decided"]
    scopes = {e.fields["tool"]: e.fields["scope"] for e in decided}
    assert scopes == {
        "gh.create": "always",
        "gh.search": "always",
        "gh.delete": "once",
        "gh.plain": "once",
    }
    ran_calls = [(name, args["title"]) for name, args in server.calls]
    assert ran_calls == [
        ("gh.create", "a"),
        ("gh.create", "a"),
        ("gh.search", "a"),
        ("gh.search", "anything else"),
        ("gh.delete", "a"),
        ("gh.plain", "a"),
    ]
