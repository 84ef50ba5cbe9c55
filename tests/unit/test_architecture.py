"""The shape of the code, read from its imports (ast) so that it stays as docs/architecture.md
draws it: `bot → adapters → runtime` with only type-only arrows against the layering, no
import cycle between the packages of `runtime/`, small files, and a thin `Runtime` facade."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"runtime": 0, "adapters": 1, "bot": 2}
MAX_LINES = 800
FACADE_LINES = 460


def sources() -> Iterator[Path]:
    for layer in LAYERS:
        yield from sorted((ROOT / layer).rglob("*.py"))


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(imported module, whether only for type checking) for every import in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in typing_only
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from runtime.risk import bash` imports a module
                yield f"{node.module}.{alias.name}", id(node) in typing_only


def test_layers_import_downwards_only() -> None:
    against = []
    for path in sources():
        mine = LAYERS[path.relative_to(ROOT).parts[0]]
        for module, type_only in imports(path):
            layer = LAYERS.get(module.split(".")[0])
            if layer is not None and layer > mine and not type_only:
                against.append(f"{module_of(path)} -> {module}")
    assert not against, against


def _runtime_package(module: str) -> str | None:
    """`runtime.risk.bash.judge` -> `runtime.risk`; a top-level module is its own node."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "runtime" and len(parts) > 1 else None


def test_no_import_cycle_between_the_packages_of_runtime() -> None:
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "runtime").rglob("*.py"):
        source = _runtime_package(module_of(path))
        if source is None:
            continue
        for module, type_only in imports(path):
            target = _runtime_package(module)
            if target and target != source and not type_only:
                graph.setdefault(source, set()).add(target)
    cycles = [cycle for cycle in _cycles(graph) if len(cycle) > 1]
    assert not cycles, cycles


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of `graph` (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("path", list(sources()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_is_too_long_to_read(path: Path) -> None:
    limit = FACADE_LINES if path == ROOT / "runtime" / "agent.py" else MAX_LINES
    assert len(path.read_text().splitlines()) <= limit


def test_platform_sdks_load_only_when_their_platform_is_enabled() -> None:
    """A Slack-only `clawgate serve` never imports lark-oapi (seconds and ~170 MB), and
    `clawgate --help` imports neither SDK; nor the mcp SDK (no server configured) or openai
    (the demo model): each adds most of a second to every start."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    probe = (
        "import sys, bot.cli, bot.server; "
        "print(sorted(m for m in ('lark_oapi', 'slack_bolt', 'slack_sdk', 'mcp', 'openai') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def _file_map() -> str:
    """The code block of docs/architecture.md's "How a message becomes an answer"."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    return doc.split("## How a message becomes an answer", 1)[1].split("```")[1]


def test_the_file_map_names_every_module_and_package_of_the_three_layers() -> None:
    """A newcomer's map that stays true: each `*.py` and package directly under runtime/,
    adapters/ and bot/ is named in it (`name.py`, `name/`)."""
    shown = _file_map()
    missing = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).iterdir()):
            if path.name.startswith(("_", ".")):
                continue
            if path.is_dir() and (path / "__init__.py").exists():
                name = f"{path.name}/"
            elif path.suffix == ".py":
                name = path.name
            else:
                continue
            if name not in shown:
                missing.append(f"{layer}/{name}")
    assert not missing, f"docs/architecture.md's file map does not name {missing}"


def test_the_facade_methods_the_map_names_exist() -> None:
    line = next(line for line in _file_map().splitlines() if "agent.py" in line)
    listed = line.split("facade:", 1)[1]
    nxt = _file_map().splitlines()
    more = nxt[nxt.index(line) + 1].split(";", 1)[0]
    names = [name.strip() for name in f"{listed},{more}".split(",") if name.strip()]
    tree = ast.parse((ROOT / "runtime" / "agent.py").read_text())
    runtime = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Runtime")
    methods = {
        n.name for n in runtime.body if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)
    }
    assert names and set(names) <= methods, sorted(set(names) - methods)
