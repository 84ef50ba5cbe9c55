"""The `[mcp]` table of the policy file: the Model Context Protocol servers admins plug in, at
any scope (`[mcp.stdio.<name>]` globally, `[conversations."<scope>".mcp.http.<name>]` for one
workspace or chat), and how their tool names read (`<server>.<tool>`).

A server is untrusted input: nothing it says about itself (its annotations) counts unless an
admin opted in for it (`trust_annotations`), and its tools are off until the tool policy
allows them. Values written `${NAME}` are read from clawgate's environment when the server
starts, so that secrets can stay out of the policy file (a ConfigMap is no place for them).
"""

from __future__ import annotations

import os
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

SEPARATOR = "."  # `github.create_issue`: the server's name, then the tool's
WILDCARD = "*"  # `github.*` in a tool list: every tool of the server
_SERVER = re.compile(r"^[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
MAX_SERVER_CHARS = 32
DEFAULT_TIMEOUT = 60.0


def _server_name(name: str) -> str:
    if len(name) > MAX_SERVER_CHARS or not _SERVER.match(name):
        raise ValueError(
            f"invalid MCP server name {name!r}: lowercase letters, digits, - and _, starting "
            f"with a letter, at most {MAX_SERVER_CHARS} characters (its tools are named "
            "<server>.<tool>)"
        )
    return name


ServerName = Annotated[str, AfterValidator(_server_name)]


def is_mcp_name(tool: str) -> bool:
    """Whether a tool name is an MCP tool's (`<server>.<tool>`); built-in names have no dot."""
    return SEPARATOR in tool


def split_name(tool: str) -> tuple[str, str]:
    """`github.create_issue` -> (`github`, `create_issue`); a tool's own name may hold dots."""
    server, _, name = tool.partition(SEPARATOR)
    return server, name


def server_wildcard(tool: str) -> str:
    """`github.create_issue` -> `github.*`: how a tool list names every tool of a server."""
    return f"{split_name(tool)[0]}{SEPARATOR}{WILDCARD}"


def names(tool: str, entries: list[str] | tuple[str, ...] | frozenset[str] | set[str]) -> bool:
    """Whether a tool list names `tool`, itself or (for an MCP tool) its whole server."""
    return tool in entries or (is_mcp_name(tool) and server_wildcard(tool) in entries)


def resolve_value(value: str) -> str:
    """A configured value, `${NAME}` read from clawgate's environment. Raises KeyError
    naming the variable when it is not set."""
    match = _REFERENCE.match(value)
    if match is None:
        return value
    found = os.environ.get(match[1])
    if found is None:
        raise KeyError(match[1])
    return found


class _Strict(BaseModel):
    # A typo must be an error, never a silently looser policy.
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerRules(_Strict):
    """What every server has, whatever its transport."""

    # false: configured but not started (its tools do not exist). Default true.
    enabled: bool = True
    # Seconds one tool call may take; then it fails (the server may still finish it).
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=3600, allow_inf_nan=False)
    # Its tools that run without asking (names as the server lists them; "*": all of them).
    no_approval: list[str] = Field(default_factory=list)
    # Let the server's own annotations count: readOnlyHint lowers the default (the tool runs
    # without asking), destructiveHint raises it (a tool "*" allowed asks again).
    trust_annotations: bool = False
    # Its tools that change nothing (names as the server lists them; "*": all of them): a
    # call a process died running is run again after the restart instead of ending "outcome
    # unknown". With `trust_annotations`, so are those the server marks readOnlyHint.
    read_only: list[str] = Field(default_factory=list)


class StdioServer(ServerRules):
    """A server clawgate starts and talks to over its stdin and stdout, in the bash sandbox."""

    command: list[str] = Field(min_length=1)  # the program and its arguments
    # The only variables it gets besides PATH, the locale and a private HOME.
    env: dict[str, str] = Field(default_factory=dict)
    network: bool = False  # the network inside its sandbox (an API client needs it)
    writable_workdir: bool = False  # CLAWGATE_WORKDIR writable instead of read-only
    # Directories the sandbox hides (/root, /home; /tmp is its own) to show it read-only:
    # where its program is installed (~/.nvm, a pyenv Python); credential stores stay hidden.
    expose: list[str] = Field(default_factory=list)

    @field_validator("command")
    @classmethod
    def _program(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("the command's program is empty")
        return command

    @field_validator("env")
    @classmethod
    def _names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [name for name in env if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"invalid environment variable names {bad}")
        return env

    @field_validator("expose")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        bad = [p for p in paths if not p.startswith("/") or ".." in p.split("/") or p == "/"]
        if bad:
            raise ValueError(f"expected absolute directories (not /), got {bad}")
        return paths

    @property
    def transport(self) -> str:
        return "stdio"


class HttpServer(ServerRules):
    """A server that is already running, reached with streamable HTTP."""

    url: str
    headers: dict[str, str] = Field(default_factory=dict)  # e.g. Authorization

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not re.match(r"^https?://[^\s/]+", url):
            raise ValueError(f"expected an http:// or https:// URL, got {url!r}")
        return url

    @property
    def transport(self) -> str:
        return "http"


ServerConfig = StdioServer | HttpServer


class McpRules(_Strict):
    """`[mcp]` at one scope: servers by name, per transport."""

    stdio: dict[ServerName, StdioServer] = Field(default_factory=dict)
    http: dict[ServerName, HttpServer] = Field(default_factory=dict)

    def servers(self) -> dict[str, ServerConfig]:
        return {**self.stdio, **self.http}
