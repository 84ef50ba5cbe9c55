"""A real MCP server for the tests, written with the official `mcp` SDK: over stdio (clawgate
starts it, in its sandbox) or streamable HTTP (the test starts it).

    python tests/mcp_server.py stdio --log calls.log
    python tests/mcp_server.py http --port 8765 --log calls.log

Every tool that runs appends one line to the log first (`<tool> <argument>`), so a test can
tell exactly what reached the server and how many times."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp_types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import Field

app = MCPServer("clawgate-test")
LOG = Path("calls.log")


def record(tool: str, argument: str) -> int:
    """Append the call to the log; how many calls it holds now."""
    with LOG.open("a", encoding="utf-8") as log:
        log.write(f"{tool} {argument}\n")
    return len(LOG.read_text(encoding="utf-8").splitlines())


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str) -> str:
    """Look a key up (read-only)."""
    record("lookup", key)
    return f"the value of {key} is 42"


@app.tool(annotations=ToolAnnotations(destructive_hint=True))
def create_issue(
    title: Annotated[str, Field(max_length=80)], labels: list[str] | None = None
) -> str:
    """Create an issue."""
    number = record("create_issue", title)
    return f"created issue #{number}: {title} {sorted(labels or [])}"


@app.tool()
async def hang(note: str) -> str:
    """Start something that never finishes (the tests kill the server meanwhile)."""
    record("hang", note)
    await anyio.sleep(600)
    return "finished"


def _ask_the_model(text: str) -> Sample:
    prompt = TextContent(type="text", text=f"Summarize: {text}")
    return Sample([SamplingMessage(role="user", content=prompt)], max_tokens=50)


@app.tool()
async def summarize(
    text: str, summary: Annotated[CreateMessageResult, Resolve(_ask_the_model)]
) -> str:
    """Summarize a text with the client's own model (MCP sampling)."""
    record("summarize", text)
    return str(summary.content)


@app.tool()
def leak() -> str:
    """A long answer holding a secret."""
    record("leak", "-")
    return "token ghp_" + "A" * 36 + "\n" + "filler line\n" * 3000


@app.tool()
async def grow(ctx: Context) -> str:
    """Change the tool list: `lookup` goes, `fresh` comes, `create_issue` changes."""
    record("grow", "-")
    app.remove_tool("lookup")
    app.remove_tool("create_issue")

    def fresh() -> str:
        record("fresh", "-")
        return "fresh"

    def create_issue(title: str, priority: int = 1) -> str:
        return f"created {title} at priority {priority}"

    app.add_tool(fresh, name="fresh", description="A tool that came later.")
    app.add_tool(create_issue, name="create_issue", description="Create an issue (v2).")
    await ctx.notify_tools_changed()
    return "grown"


def main() -> None:
    global LOG  # noqa: PLW0603 - set once, before serving
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cache", type=Path, help="a file to write at start, as many do")
    args = parser.parse_args()
    LOG = args.log
    if args.cache is not None:
        try:
            args.cache.parent.mkdir(parents=True, exist_ok=True)
            args.cache.write_text("{}")
        except OSError as exc:  # as such servers do: go on without, and say so
            print(f"warning: no cache, every call will be slow: {exc}", file=sys.stderr)
    if args.transport == "stdio":
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
