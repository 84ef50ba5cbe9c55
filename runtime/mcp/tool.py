"""An MCP server's tool as a clawgate tool: named `<server>.<tool>`, its arguments validated
against the listed input schema before anything runs, judged by runtime.mcp.risk, and run
through the same executor, middleware chain and approval path as the built-in tools (so an
approved call runs exactly once, and one cut off mid-way ends `outcome_unknown`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from pydantic import ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from runtime.mcp import risk
from runtime.mcp.config import SEPARATOR, ServerRules
from runtime.mcp.listing import Listed
from runtime.mcp.refused_writes import SANDBOX_WRITES, refused_write
from runtime.mcp.results import result_text
from runtime.models import ToolSpec
from runtime.redact import one_line
from runtime.risk.policy import RiskDecision
from runtime.tools.base import Effects, Tool, ToolArgs, ToolContext, ToolError, ToolOutput

MAX_PROBLEMS = 5  # schema errors named to the model at once


class Server(Protocol):
    """What a tool needs of its server's connection (runtime.mcp.connection)."""

    name: str

    @property
    def rules(self) -> ServerRules: ...

    @property
    def sandboxed(self) -> bool:
        """A stdio server in the OS sandbox (where writes outside $HOME and /tmp fail)."""

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> Any:
        """The `CallToolResult`, or `ToolError` saying plainly why the call failed."""


class McpArguments(ToolArgs):
    """Any JSON object the tool's listed input schema accepts (checked with jsonschema)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    listing: ClassVar[Listed]

    @model_validator(mode="before")
    @classmethod
    def _matches_schema(cls, data: Any) -> Any:
        errors = sorted(cls.listing.validator.iter_errors(data), key=lambda e: list(e.path))
        if errors:
            problems = "; ".join(_problem(error) for error in errors[:MAX_PROBLEMS])
            more = f" (and {len(errors) - MAX_PROBLEMS} more)" if len(errors) > MAX_PROBLEMS else ""
            raise PydanticCustomError("mcp_schema", "{problems}", {"problems": problems + more})
        return data


def _problem(error: Any) -> str:
    where = ".".join(map(str, error.absolute_path))
    message = one_line(error.message, 200)
    return f"{where}: {message}" if where else message


def arguments_model(listing: Listed) -> type[McpArguments]:
    """A model per listed tool (and per version of it): the executor, the edit form and the
    approval path validate through `args_model` like for every tool."""
    return type(f"McpArguments_{listing.signature}", (McpArguments,), {"listing": listing})


class McpTool(Tool[McpArguments]):
    parallel_safe = False  # a server's tool may do anything: one at a time, in order

    def __init__(self, server: Server, listing: Listed) -> None:
        self.server = server
        self.listing = listing
        self.name = f"{server.name}{SEPARATOR}{listing.name}"
        self.description = f"[MCP server {server.name}] {listing.description}"
        self.args_model = arguments_model(listing)
        self._spec = ToolSpec(
            name=self.name, description=self.description, parameters=listing.schema
        )

    @property
    def signature(self) -> str:
        return self.listing.signature

    def spec(self) -> ToolSpec:
        return self._spec

    def no_always(self) -> str | None:
        """Why no "approve always" may cover calls of this tool (None: one may)."""
        return risk.no_always(self.listing)

    def judge(self, arguments: Mapping[str, Any], safe_tools: frozenset[str]) -> RiskDecision:
        return risk.judge(self.name, self.server.name, self.listing, self.server.rules, safe_tools)

    def effects(self, ctx: ToolContext) -> Effects:
        """Read-only only where an admin says so (runtime.mcp.risk.read_only): a server's
        tool may do anything, whatever the call's access."""
        if risk.read_only(self.listing, self.server.rules):
            return Effects("mcp-read-only", again=True)
        return Effects("mcp", again=False)

    async def run(self, args: McpArguments, ctx: ToolContext) -> ToolOutput:
        result = await self.server.call(self, args.model_dump(mode="json"))
        text, failed = result_text(result)
        if failed:
            refused = refused_write(text) if self.server.sandboxed else None
            hint = f" (it could not write {refused}: {SANDBOX_WRITES})" if refused else ""
            raise ToolError(
                f"the MCP server {self.server.name} answered with an error: {text}{hint}"
            )
        return ToolOutput(text, display=f"{self.name}: {one_line(text, 120) or '(no output)'}")
