"""MCP tools as the policy sees them, without a server: the `[mcp]` table, tool names and
scopes in the layered policy, the risk judgement, listed tools and their arguments, results,
the names sent to an OpenAI-compatible API, and what a stdio server is started with."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import pytest
from mcp_types import CallToolResult, TextContent, Tool, ToolExecution
from pydantic import ValidationError

from bot.policy_file import PolicyFileError, load_policy_file
from bot.wiring import TOOL_NAMES
from runtime.approval.always import cover_of, rule_for_call, rule_for_record
from runtime.approval.models import SCHEMA_VERSION, AlwaysCover, ApprovalRecord
from runtime.mcp.config import HttpServer, ServerRules, StdioServer
from runtime.mcp.launch import LaunchError, environment, stdio_parameters
from runtime.mcp.listing import Unusable, listed
from runtime.mcp.refused_writes import refused_write
from runtime.mcp.results import MAX_OUTPUT_CHARS, result_text
from runtime.mcp.risk import judge, read_only
from runtime.mcp.tool import McpTool, arguments_model
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import MCP_OFF, Defaults, resolve
from runtime.providers.names import name_map, wire_name
from runtime.risk.policy import Verdict
from runtime.tools.base import ToolContext, ToolError
from runtime.tools.sandbox import NetworkAccess, Sandbox, SandboxMode

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string", "maxLength": 5}, "n": {"type": "integer"}},
    "required": ["title"],
}


def tool(
    name: str = "create",
    schema: dict[str, Any] | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
) -> Any:
    annotations = SimpleNamespace(read_only_hint=read_only, destructive_hint=destructive)
    return SimpleNamespace(
        name=name,
        input_schema=SCHEMA if schema is None else schema,
        annotations=annotations,
        description="Create one.",
        title=None,
    )


def document(toml: str) -> PolicyDocument:
    import tomllib  # noqa: PLC0415

    return PolicyDocument.model_validate(tomllib.loads(toml))


SERVERS = """
[mcp.stdio.gh]
command = ["gh-mcp"]
[conversations."slack:T1".mcp.http.wiki]
url = "http://127.0.0.1:9/mcp"
"""


# -- the policy file ----------------------------------------------------------------------------


def test_servers_are_named_checked_and_scoped(tmp_path: Path) -> None:
    doc = document(SERVERS)
    assert {n: s for n, (s, _) in doc.mcp_servers().items()} == {"gh": "", "wiki": "slack:T1"}
    for bad, problem in [
        ('[mcp.stdio."Git.Hub"]\ncommand = ["x"]', "invalid MCP server name"),
        ('[mcp.stdio.a]\ncommand = ["x"]\n[mcp.http.a]\nurl = "http://h/mcp"', "twice"),
        ('[mcp.http.a]\nurl = "ftp://h"', "http:// or https://"),
        ('[mcp.stdio.a]\ncommand = ["x"]\nexpose = ["relative"]', "absolute"),
        ('[mcp.stdio.a]\ncommand = ["x"]\nenvv = {}', "envv"),
    ]:
        path = tmp_path / "clawgate.toml"
        path.write_text(bad)
        with pytest.raises(PolicyFileError, match=problem):
            load_policy_file(path, TOOL_NAMES)


def test_tool_names_of_configured_servers_are_known_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text(SERVERS + '[tools]\nallow = ["read", "gh.create_issue", "wiki.*"]\n')
    assert load_policy_file(path, TOOL_NAMES).tools.allow == ["read", "gh.create_issue", "wiki.*"]
    path.write_text(SERVERS + '[tools]\ndeny = ["gitlab.merge"]\n')
    with pytest.raises(PolicyFileError, match=r"unknown tools gitlab\.merge"):
        load_policy_file(path, TOOL_NAMES)


def verdicts(toml: str, conversation: str, *tools: str) -> dict[str, tuple[str, str]]:
    defaults = Defaults(enabled=("read", "bash"))
    policy = resolve(document(SERVERS + toml), {}, conversation, defaults, ["read", *tools])
    return {t: (policy.verdict(t).state, policy.verdict(t).source) for t in tools}


def test_an_mcp_tool_is_off_until_the_policy_allows_it_and_a_deny_wins() -> None:
    assert verdicts("", "slack:T1:C1", "gh.create_issue") == {"gh.create_issue": ("off", MCP_OFF)}
    allowed = verdicts('[tools]\nallow = ["read", "gh.*"]', "slack:T1:C1", "gh.create_issue")
    assert allowed["gh.create_issue"][0] == "allow"
    both = '[tools]\nallow = ["gh.*"]\n[conversations."slack:T1".tools]\ndeny = ["gh.create_issue"]'
    assert verdicts(both, "slack:T1:C1", "gh.create_issue")["gh.create_issue"][0] == "deny"
    asks = '[tools]\nallow = ["gh.*"]\nask = ["gh.*"]'
    assert verdicts(asks, "slack:T2:C1", "gh.create_issue")["gh.create_issue"][0] == "ask"


def test_a_server_configured_for_a_scope_serves_only_there() -> None:
    toml = '[tools]\nallow = ["wiki.*"]'
    assert verdicts(toml, "slack:T1:C9", "wiki.page")["wiki.page"][0] == "allow"
    state, source = verdicts(toml, "slack:T2:C9", "wiki.page")["wiki.page"]
    assert state == "off" and "serves slack:T1 only" in source


# -- the risk judgement -------------------------------------------------------------------------


def test_an_mcp_call_asks_by_default_and_names_server_tool_and_signature() -> None:
    checked = listed(tool(read_only=True))
    rules = StdioServer(command=["x"])
    decision = judge("gh.create", "gh", checked, rules, frozenset({"read"}))
    assert decision.verdict is Verdict.ASK
    (reason,) = decision.reasons
    assert "gh.create (MCP server gh, tool signature " + checked.signature in reason
    assert "asks for approval by default" in reason  # readOnlyHint: not trusted


@pytest.mark.parametrize(
    ("rules", "safe", "hints", "verdict"),
    [
        ({"no_approval": ["create"]}, [], {"destructive": True}, Verdict.ALLOW),
        ({"no_approval": ["*"]}, [], {}, Verdict.ALLOW),
        ({"no_approval": ["*"], "trust_annotations": True}, [], {"destructive": True}, "ask"),
        ({"trust_annotations": True}, [], {"read_only": True}, Verdict.ALLOW),
        ({"trust_annotations": True}, [], {"read_only": True, "destructive": True}, "ask"),
        ({}, ["gh.create"], {}, Verdict.ALLOW),
        ({}, ["gh.*"], {}, Verdict.ALLOW),
    ],
)
def test_the_policy_and_trusted_annotations_lower_or_raise_the_default(
    rules: dict[str, Any], safe: list[str], hints: dict[str, bool], verdict: str
) -> None:
    server = HttpServer(url="http://h/mcp", **rules)
    raw = tool(read_only=hints.get("read_only"), destructive=hints.get("destructive"))
    decision = judge("gh.create", "gh", listed(raw), server, frozenset(safe))
    assert decision.verdict == verdict


@pytest.mark.parametrize(
    ("rules", "hints", "expected"),
    [
        ({}, {}, False),
        ({"read_only": ["create"]}, {}, True),
        ({"read_only": ["*"]}, {}, True),
        ({"read_only": ["other"]}, {}, False),
        ({}, {"read_only": True}, False),  # the server's word counts only when trusted
        ({"trust_annotations": True}, {"read_only": True}, True),
        ({"trust_annotations": True}, {"read_only": True, "destructive": True}, False),
    ],
)
def test_an_mcp_tool_runs_again_after_a_crash_only_where_an_admin_trusts_it_read_only(
    rules: dict[str, Any], hints: dict[str, bool], expected: bool
) -> None:
    server = HttpServer(url="http://h/mcp", **rules)
    raw = tool(read_only=hints.get("read_only"), destructive=hints.get("destructive"))
    assert read_only(listed(raw), server) is expected
    connection = SimpleNamespace(name="gh", rules=server)
    effects = McpTool(connection, listed(raw)).effects(ToolContext("s1", Path(".")))
    assert effects.again is expected
    assert effects.kind == ("mcp-read-only" if expected else "mcp")


def test_a_signature_changes_with_the_schema() -> None:
    one = listed(tool()).signature
    other = listed(tool(schema={**SCHEMA, "required": ["title", "n"]})).signature
    assert one != other and len(one) == 10


class _Server:
    name = "gh"
    rules = ServerRules()
    sandboxed = True

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> Any:
        raise AssertionError("not called")


@pytest.mark.parametrize(
    ("hints", "generalized", "cover"),
    [
        ({"destructive": False}, False, AlwaysCover.EXACT),
        ({"read_only": True}, True, AlwaysCover.ANY),
        ({"destructive": True}, True, AlwaysCover.NEVER),  # never, whatever the policy says
        ({}, True, AlwaysCover.NEVER),  # unannotated
    ],
)
def test_an_always_of_an_mcp_tool_covers_its_version_and_exact_arguments_unless_generalized(
    hints: dict[str, bool], generalized: bool, cover: AlwaysCover
) -> None:
    raw = tool(read_only=hints.get("read_only"), destructive=hints.get("destructive"))
    mcp = McpTool(_Server(), listed(raw))
    policy = resolve(
        document(SERVERS + ('[tools]\ngeneralize_arguments = ["gh.*"]\n' if generalized else "")),
        {},
        "slack:T1:C1",
        Defaults(enabled=()),
        ["gh.create"],
    )
    assert cover_of("gh.create", mcp, policy)[0] is cover
    one = rule_for_call("gh.create", mcp, {"title": "a"}, policy)
    other = rule_for_call("gh.create", mcp, {"title": "b"}, policy)
    if cover is AlwaysCover.NEVER:
        assert one is None and other is None
        return
    assert one is not None and f"signature:{mcp.signature}" in one
    assert (one == other) is (cover is AlwaysCover.ANY)
    record = ApprovalRecord.model_validate(
        {**V2_RECORD, "signature": mcp.signature, "always": cover.value}
    )
    assert rule_for_record(record, {"title": "a"}) == one  # what the grant adds is looked up


V2_RECORD: dict[str, Any] = {
    "schema_version": 2,
    "id": "k3x9q2m7vd4pw",
    "session": "s1",
    "conversation": {"platform": "slack", "id": "slack:T1:C1"},
    "requester": {"platform": "slack", "user_id": "U1"},
    "tool": "gh.create",
    "arguments": '{"title":"a"}',
    "call_id": "call_1",
    "call_hash": "0" * 64,
    "reasons": ["gh.create (MCP server gh, tool signature 0123456789): an MCP tool asks"],
}


def test_an_older_record_of_an_mcp_tool_keeps_its_signature_and_is_approved_once_only() -> None:
    record = ApprovalRecord.model_validate(V2_RECORD)
    assert record.schema_version == SCHEMA_VERSION and record.signature == "0123456789"
    assert record.always is AlwaysCover.NEVER and record.no_always
    assert rule_for_record(record, {"title": "a"}) is None
    bash = ApprovalRecord.model_validate({**V2_RECORD, "tool": "bash", "reasons": ["rm"]})
    assert bash.always is AlwaysCover.RULE and bash.signature is None


# -- listed tools and their arguments -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (tool(name="bad name"), "not a valid MCP tool name"),
        (tool(schema={"type": "string"}), "does not describe a JSON object"),
        (tool(schema={"type": "object", "properties": {"a": {"type": 7}}}), "schema is invalid"),
        (tool(schema={"type": "object", "properties": {"approved": {}}}), "clawgate owns"),
        (tool(schema={"type": "object", "description": "x" * 70_000}), "over 64000"),
    ],
)
def test_a_tool_that_cannot_be_checked_is_not_offered(raw: Any, problem: str) -> None:
    with pytest.raises(Unusable, match=problem):
        listed(raw)


@pytest.mark.parametrize(
    ("support", "offered"), [("required", False), ("optional", True), (None, True)]
)
def test_a_tool_that_runs_only_as_an_mcp_task_is_not_offered(
    support: Literal["required", "optional"] | None, offered: bool
) -> None:
    """A task-augmented call answers with a task to poll, which clawgate never makes."""
    raw = Tool(
        name="build",
        input_schema=SCHEMA,
        execution=ToolExecution(task_support=support),
    )
    if offered:
        assert listed(raw).name == "build"
    else:
        with pytest.raises(Unusable, match="runs only as an MCP task"):
            listed(raw)


def test_arguments_are_validated_against_the_listed_schema() -> None:
    model = arguments_model(listed(tool()))
    assert model.model_validate({"title": "abc", "n": 2}).model_dump(mode="json") == {
        "title": "abc",
        "n": 2,
    }
    with pytest.raises(ValidationError) as raised:
        model.model_validate({"title": "abcdefg", "n": "x"})
    message = raised.value.errors()[0]["msg"]
    assert (
        "n: 'x' is not of type 'integer'" in message and "title: 'abcdefg' is too long" in message
    )


def test_results_are_text_bounded_with_media_named() -> None:
    blocks = [
        SimpleNamespace(type="text", text="hello"),
        SimpleNamespace(type="image", data="QUJD", mime_type="image/png"),
    ]
    result = SimpleNamespace(content=blocks, structured_content=None, is_error=False)
    assert result_text(result) == ("hello\n[image image/png, 4 base64 characters]", False)
    structured = SimpleNamespace(content=[], structured_content={"a": 1}, is_error=True)
    assert result_text(structured) == (json.dumps({"a": 1}, indent=1), True)
    huge = SimpleNamespace(
        content=[SimpleNamespace(type="text", text="x" * (MAX_OUTPUT_CHARS + 5))]
    )
    huge.structured_content, huge.is_error = None, False
    assert result_text(huge)[0].endswith(f"[result cut at {MAX_OUTPUT_CHARS} characters]")


def test_names_sent_to_the_model_api_are_accepted_and_map_back() -> None:
    assert wire_name("bash") == "bash"
    assert wire_name("github.create_issue") == "github__create_issue"
    long = "server." + "t" * 100
    assert len(wire_name(long)) == 64 and wire_name(long) == wire_name(long)
    assert name_map(["read", "github.create_issue"]) == {
        "read": "read",
        "github__create_issue": "github.create_issue",
    }


# -- how a stdio server starts ------------------------------------------------------------------


def test_a_stdio_server_gets_only_the_basics_and_its_policy_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GH_TOKEN", "ghp_from_the_secret")
    config = StdioServer(command=["gh-mcp"], env={"TOKEN": "${GH_TOKEN}", "MODE": "ro"})
    env = environment(config, "/tmp/home")
    assert env["TOKEN"] == "ghp_from_the_secret" and env["MODE"] == "ro"
    assert env["HOME"] == "/tmp/home" and "OPENAI_API_KEY" not in env
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TOKEN", "MODE"}
    monkeypatch.delenv("GH_TOKEN")
    with pytest.raises(LaunchError, match=r"\$\{GH_TOKEN\} is not set"):
        environment(config, "/tmp/home")

    sandbox = Sandbox(SandboxMode.BWRAP, bwrap="/usr/bin/bwrap", network=NetworkAccess.NEVER)
    plain = StdioServer(command=["gh-mcp", "stdio"], network=True)
    params = stdio_parameters(plain, sandbox, tmp_path)
    argv = [params.command, *params.args]
    # bwrap, behind the shell that hands it the seccomp filter against unix sockets
    assert "/usr/bin/bwrap" in argv[:5] and "--share-net" not in argv  # never means never
    assert argv[argv.index("--") + 1 :][:3] == ["env", "-u", "LOGNAME"]
    assert argv[-2:] == ["gh-mcp", "stdio"] and "sk-secret" not in " ".join(argv)
    missing = Sandbox(SandboxMode.AUTO, problem="bwrap is not installed")
    with pytest.raises(LaunchError, match="no OS sandbox"):
        stdio_parameters(plain, missing, tmp_path)


@pytest.mark.parametrize(
    ("said", "found"),
    [
        ("OSError: [Errno 30] Read-only file system: '/w/.cache/x.json'", "/w/.cache/x.json"),
        (
            "Error: EROFS: read-only file system, open '/w/node_modules/.cache'",
            "/w/node_modules/.cache",
        ),
        ("open /w/cache.db: read-only file system", "/w/cache.db"),
        (
            "PermissionError: [Errno 13] Permission denied",
            "PermissionError: [Errno 13] Permission denied",
        ),
        ("listening on stdio", None),
    ],
)
def test_a_refused_write_is_found_in_what_a_server_said(said: str, found: str | None) -> None:
    assert refused_write(f"starting\n{said}\nok") == found


async def test_a_tool_error_from_a_refused_write_names_the_fix() -> None:
    class Refusing(_Server):
        async def call(self, tool: McpTool, arguments: dict[str, Any]) -> Any:
            text = "OSError: [Errno 30] Read-only file system: '/w/.cache'"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    mcp = McpTool(Refusing(), listed(tool()))
    with pytest.raises(ToolError, match=r"could not write /w/\.cache: its sandbox is read-only"):
        await mcp.run(mcp.args_model.model_validate({"title": "x"}), ToolContext("s1", Path(".")))
