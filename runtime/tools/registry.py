"""Every known tool, and the active view the model sees (the middleware chain they run
through is the executor's: see runtime.middleware)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

from runtime.canonical import RUNTIME_MARKERS
from runtime.models import ToolSpec
from runtime.tools.base import Tool


class ToolSource(Protocol):
    """Tools that come and go while the process runs (an MCP server's): read on every lookup,
    so a tool that vanished is unknown from that moment on. The policy, not
    CLAWGATE_ENABLED_TOOLS, decides where they are active."""

    def tools(self) -> Mapping[str, Tool[Any]]: ...


class ToolRegistry:
    def __init__(
        self,
        tools: Iterable[Tool[Any]] = (),
        enabled: Iterable[str] | None = None,
        excluded: Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._specs: dict[str, ToolSpec] = {}  # schema generation is slow; specs never change
        self._sources: list[ToolSource] = []
        for tool in tools:
            self.register(tool)
        self.enabled = None if enabled is None else frozenset(enabled)
        self.excluded = frozenset(excluded)

    def register(self, tool: Tool[Any]) -> None:
        clash = RUNTIME_MARKERS & set(tool.args_model.model_fields)
        if clash:
            raise ValueError(
                f"tool {tool.name!r} uses runtime-owned argument names {sorted(clash)}"
            )
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec()

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    def _sourced(self) -> dict[str, Tool[Any]]:
        found: dict[str, Tool[Any]] = {}
        for source in self._sources:
            for name, tool in source.tools().items():
                found.setdefault(name, tool)
        return {name: tool for name, tool in found.items() if name not in self._tools}

    def known(self, name: str) -> bool:
        return name in self._tools or name in self._sourced()

    def is_active(self, name: str) -> bool:
        if name in self.excluded:
            return False
        if name not in self._tools:
            return name in self._sourced()
        return self.enabled is None or name in self.enabled

    def resolve(self, name: str) -> Tool[Any] | None:
        """The tool if it is active right now; the executor asks at execution time."""
        if not self.is_active(name):
            return None
        return self._tools.get(name) or self._sourced().get(name)

    def active(self) -> list[Tool[Any]]:
        sourced = [tool for name, tool in self._sourced().items() if name not in self.excluded]
        return [tool for name, tool in self._tools.items() if self.is_active(name)] + sourced

    def specs(self, only: Collection[str] | None = None) -> list[ToolSpec]:
        """What the model is shown: the active tools, or those of them in `only`."""
        return [
            self._specs[tool.name] if tool.name in self._specs else tool.spec()
            for tool in self.active()
            if only is None or tool.name in only
        ]
