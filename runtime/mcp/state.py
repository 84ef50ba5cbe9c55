"""A supervised MCP server's state, apart from the connection (and the `mcp` SDK, slow to
import): processes without servers report none without loading it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server as /readyz and `clawgate doctor` show it."""

    name: str
    transport: str
    state: str  # starting | up | down | stopped
    detail: str
    warning: str | None = None  # up, but what it said at start may fail its first calls

    @property
    def line(self) -> str:
        warning = f"; {self.warning}" if self.warning else ""
        return f"mcp {self.name} ({self.transport}): {self.state}, {self.detail}{warning}"
