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

    @property
    def line(self) -> str:
        return f"mcp {self.name} ({self.transport}): {self.state}, {self.detail}"
