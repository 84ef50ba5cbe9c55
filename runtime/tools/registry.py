"""Every known tool, and the active view the model sees (the middleware chain they run
through is the executor's: see runtime.middleware)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from runtime.canonical import RUNTIME_MARKERS
from runtime.models import ToolSpec
from runtime.tools.base import Tool


class ToolRegistry:
    def __init__(
        self,
        tools: Iterable[Tool[Any]] = (),
        enabled: Iterable[str] | None = None,
        excluded: Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        self._specs: dict[str, ToolSpec] = {}  # schema generation is slow; specs never change
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

    def known(self, name: str) -> bool:
        return name in self._tools

    def is_active(self, name: str) -> bool:
        if name not in self._tools or name in self.excluded:
            return False
        return self.enabled is None or name in self.enabled

    def resolve(self, name: str) -> Tool[Any] | None:
        """The tool if it is active right now; the executor asks at execution time."""
        return self._tools[name] if self.is_active(name) else None

    def active(self) -> list[Tool[Any]]:
        return [tool for name, tool in self._tools.items() if self.is_active(name)]

    def specs(self, only: Collection[str] | None = None) -> list[ToolSpec]:
        """What the model is shown: the active tools, or those of them in `only`."""
        return [
            self._specs[tool.name] for tool in self.active() if only is None or tool.name in only
        ]
