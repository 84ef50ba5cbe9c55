"""The policy document: what admins decide, globally and per conversation scope.

A scope is a conversation id or a prefix of it, cut at colons: `slack` (the platform),
`slack:T123` (a workspace or tenant), `slack:T123:C456` (one chat). Every field is optional
at every scope; `runtime.policy.resolve` layers them (most specific wins; deny always wins).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.mcp.config import McpRules, ServerConfig, is_mcp_name, split_name
from runtime.policy.listed_models import ListedModel, check_unique
from runtime.policy.modes import ModeRules
from runtime.risk.policy import check_patterns

GLOBAL = ""  # the scope that matches every conversation
EVERYONE = "*"  # in [access] users: no allowlist
DIRECT = "dm"  # in [approvals] notify: to each approver directly
_SCOPE = re.compile(r"^[a-z]+(:[^\s:]+)*$")
_PERSON = re.compile(r"^[a-z]+:[^\s:]+$")
_CONVERSATION = re.compile(r"^[a-z]+:[^\s:]+:[^\s:]+$")
_HOOK_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
OverrideState = Literal["allow", "deny"]
MAX_TIMEOUT = 30 * 86_400
MAX_QUORUM = 5
MAX_HOOK_TIMEOUT = 60.0
MAX_HOOK_CACHE = 86_400.0


def check_scope(scope: str) -> str:
    if scope != GLOBAL and not _SCOPE.match(scope):
        raise ValueError(
            f"invalid scope {scope!r}: expected a conversation id or a prefix of one, like "
            "slack, slack:T123 or slack:T123:C456"
        )
    return scope


def _conversation_scope(scope: str) -> str:
    if scope == GLOBAL:
        raise ValueError('the global rules go at the top of the file, not under ""')
    return check_scope(scope)


# A key of [conversations."<scope>"]; checked apart from its table, so both are reported.
Scope = Annotated[str, AfterValidator(_conversation_scope)]


def scopes_of(conversation_id: str) -> list[str]:
    """The scopes that match a conversation, least specific first: "", "slack",
    "slack:T1", "slack:T1:C1"."""
    parts = conversation_id.split(":") if conversation_id else []
    return [GLOBAL, *(":".join(parts[: i + 1]) for i in range(len(parts)))]


def check_people(people: list[str]) -> list[str]:
    bad = [p for p in people if not _PERSON.match(p)]
    if bad:
        raise ValueError(f"expected platform:user entries like slack:U123, got {bad}")
    return people


def scope_label(scope: str) -> str:
    return "global" if scope == GLOBAL else scope


class _Strict(BaseModel):
    # A typo must be an error, never a silently looser policy.
    model_config = ConfigDict(extra="forbid")


class ToolRules(_Strict):
    # allow: only these tools may run here (most specific scope wins); unset: every enabled one.
    allow: list[str] | None = None
    # deny and ask add up from global to the conversation: a deny anywhere wins over any allow.
    deny: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)  # always ask a human, whatever the risk rules
    # MCP tools (`<server>.<tool>`, `<server>.*`) whose "approve always" covers any arguments;
    # any other MCP tool's covers only the exact arguments approved. Add up like `ask`.
    generalize_arguments: list[str] = Field(default_factory=list)

    @field_validator("generalize_arguments")
    @classmethod
    def _mcp_tools(cls, tools: list[str]) -> list[str]:
        bad = [t for t in tools if not is_mcp_name(t) or not split_name(t)[1]]
        if bad:
            raise ValueError(
                f"expected MCP tool names like github.search_issues or github.*, got {bad} (a "
                'built-in tool\'s "approve always" follows its own rule)'
            )
        return tools

    def named(self) -> set[str]:
        return {*(self.allow or ()), *self.deny, *self.ask, *self.generalize_arguments}


class RiskRules(_Strict):
    """`[risk]` at one scope. Patterns and protected paths add up from global to the
    conversation (they only make clawgate stricter); the other fields come from the most
    specific scope that sets them."""

    safe_programs: list[str] | None = None
    ask_patterns: list[str] = Field(default_factory=list)
    deny_patterns: list[str] = Field(default_factory=list)
    protected_paths: list[str] = Field(default_factory=list)
    safe_tools: list[str] | None = None
    large_deletion_lines: int | None = Field(None, ge=1)

    @field_validator("ask_patterns", "deny_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        return check_patterns(patterns)


def check_routes(ids: list[str]) -> list[str]:
    """Where approval requests go too: conversation ids, or "dm" (each approver directly)."""
    bad = [i for i in ids if i != DIRECT and not _CONVERSATION.match(i)]
    if bad:
        raise ValueError(
            "expected conversation ids like slack:T123:C456 or feishu:<tenant>:<chat_id>, "
            f'or "dm", got {bad}'
        )
    return ids


class ApprovalRules(_Strict):
    # People add up from global to the conversation; the others: most specific scope wins.
    admins: list[str] = Field(default_factory=list)
    approvers: list[str] = Field(default_factory=list)
    requester_may_approve: bool | None = None
    # Seconds, at most 30 days; default CLAWGATE_APPROVAL_TIMEOUT.
    timeout: float | None = Field(None, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    # Seconds after which a request still pending is brought up again (in its thread and the
    # `notify` conversations), and after which `escalate_to` may decide it too (they are
    # told). Most specific scope wins; `escalate_to` adds up.
    remind_after: float | None = Field(None, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    escalate_after: float | None = Field(None, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    escalate_to: list[str] = Field(default_factory=list)
    # Conversations (ids such as slack:T123:C456 or feishu:<tenant>:<chat_id>) where approval
    # requests are posted too, besides the thread that asked: an approvers' channel; "dm": to
    # each approver (else each admin) directly. A decision from any of them counts. Add up
    # from global to the conversation.
    notify: list[str] = Field(default_factory=list)
    # The N-person rule: calls of these tools, or whose risk reasons match these regexes, need
    # N distinct approvers (2-5; the requester never counts). Add up from global to the
    # conversation: the highest N that applies wins.
    quorum_tools: dict[str, Annotated[int, Field(ge=2, le=MAX_QUORUM)]] = Field(
        default_factory=dict
    )
    quorum_reasons: dict[str, Annotated[int, Field(ge=2, le=MAX_QUORUM)]] = Field(
        default_factory=dict
    )

    @field_validator("admins", "approvers", "escalate_to")
    @classmethod
    def _people(cls, people: list[str]) -> list[str]:
        return check_people(people)

    @field_validator("notify")
    @classmethod
    def _conversations(cls, ids: list[str]) -> list[str]:
        return check_routes(ids)

    @field_validator("quorum_reasons")
    @classmethod
    def _reasons_compile(cls, reasons: dict[str, int]) -> dict[str, int]:
        check_patterns(list(reasons))
        return reasons


class AccessRules(_Strict):
    """`[access]`: who may talk to the bot. Each field comes from the most specific scope that
    sets it; admins may always."""

    # Only these people may send it messages here; unset or "*": everyone who can reach it.
    users: list[str] | None = None
    # Whether direct messages with the bot are open (default yes).
    direct_messages: bool | None = None

    @field_validator("users")
    @classmethod
    def _people(cls, people: list[str] | None) -> list[str] | None:
        if people is not None:
            check_people([p for p in people if p != EVERYONE])
        return people


class HookConfig(_Strict):
    """`[hooks.<name>]`: an admin's own check of tool calls (runtime/hooks), either a command
    (the call as JSON on stdin, the answer as JSON on stdout) or an HTTP endpoint (POSTed the
    same JSON; OPA's data API answers in the shape it expects)."""

    command: list[str] | None = Field(None, min_length=1)  # argv, run without a shell
    url: str | None = None
    tools: list[str] | None = None  # the tools it checks; unset: every tool
    timeout: float = Field(5.0, gt=0, le=MAX_HOOK_TIMEOUT, allow_inf_nan=False)  # seconds
    # Seconds an answer is reused for the same call (same hook, same input); 0: never.
    cache_seconds: float = Field(0.0, ge=0, le=MAX_HOOK_CACHE, allow_inf_nan=False)
    # command: variables of clawgate's environment it is given besides PATH and LANG.
    env: list[str] = Field(default_factory=list)
    # url: request headers; a value may be ${NAME}, read from clawgate's environment.
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True  # false: configured, never asked

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not re.match(r"^https?://[^\s/]+", url):
            raise ValueError(f"expected an http:// or https:// URL, got {url!r}")
        return url

    @model_validator(mode="after")
    def _one_kind(self) -> HookConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("a hook has either a command or a url (not both)")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url hook; a command hook gets env")
        if self.url is not None and self.env:
            raise ValueError("env is for a command hook; a url hook gets headers")
        return self

    @property
    def target(self) -> str:
        """What it runs, for people."""
        return self.url or " ".join(self.command or ())


def _hook_names(hooks: dict[str, HookConfig]) -> dict[str, HookConfig]:
    bad = [name for name in hooks if not _HOOK_NAME.match(name)]
    if bad:
        raise ValueError(f"hook names are letters, digits, - and _ (at most 64), got {bad}")
    return hooks


class ScopeRules(_Strict):
    tools: ToolRules = Field(default_factory=ToolRules)
    risk: RiskRules = Field(default_factory=RiskRules)
    approvals: ApprovalRules = Field(default_factory=ApprovalRules)
    access: AccessRules = Field(default_factory=AccessRules)
    # MCP servers whose tools exist in this scope (docs/mcp.md).
    mcp: McpRules = Field(default_factory=McpRules)
    # Admins' own checks of the calls made here; they add up from global to the conversation.
    hooks: Annotated[dict[str, HookConfig], AfterValidator(_hook_names)] = Field(
        default_factory=dict
    )
    modes: ModeRules = Field(default_factory=ModeRules)  # runtime/policy/modes.py


class PolicyDocument(ScopeRules):
    """The whole file: the global rules at the top, then `[conversations."<scope>"]` tables."""

    conversations: dict[Scope, ScopeRules] = Field(default_factory=dict)
    # The models a conversation may switch to (`[[models]]`, global only).
    models: list[ListedModel] = Field(default_factory=list)

    @field_validator("models")
    @classmethod
    def _unique_models(cls, models: list[ListedModel]) -> list[ListedModel]:
        return check_unique(models)

    @property
    def offered_models(self) -> list[ListedModel]:
        """The listed models a conversation may switch to (those enabled)."""
        return [m for m in self.models if m.enabled]

    def listed_model(self, name: str) -> ListedModel | None:
        return next((m for m in self.offered_models if m.name == name), None)

    @model_validator(mode="after")
    def _one_server_per_name(self) -> PolicyDocument:
        # A tool name (`<server>.<tool>`) must say which server it belongs to.
        seen: set[str] = set()
        for rules in (self, *self.conversations.values()):
            for name in [*rules.mcp.stdio, *rules.mcp.http]:
                if name in seen:
                    raise ValueError(f"the MCP server name {name!r} is configured twice")
                seen.add(name)
        hooks: set[str] = set()
        for rules in (self, *self.conversations.values()):
            for name in rules.hooks:
                if name in hooks:  # the name says which check decided, in the audit trail
                    raise ValueError(f"the hook name {name!r} is configured twice")
                hooks.add(name)
        return self

    def scopes(self) -> list[ScopeRules]:
        """The rules of every scope: the global ones first."""
        return [self, *self.conversations.values()]

    def at(self, scope: str) -> ScopeRules | None:
        return self if scope == GLOBAL else self.conversations.get(scope)

    def mcp_servers(self) -> dict[str, tuple[str, ServerConfig]]:
        """Every MCP server the file configures: name -> (the scope it serves, its rules)."""
        found: dict[str, tuple[str, ServerConfig]] = {}
        for scope, rules in [(GLOBAL, self), *self.conversations.items()]:
            for name, server in rules.mcp.servers().items():
                found[name] = (scope, server)
        return found

    def unknown_tools(self, tools: set[str] | frozenset[str]) -> list[str]:
        """The tool names the file mentions that are neither among `tools` nor a tool (or
        `<server>.*`) of a server it configures: MCP tools are known only once their server
        lists them, so their own names cannot be checked here."""
        servers = self.mcp_servers()
        return sorted(
            name
            for name in self.tools_named() - set(tools)
            if not (is_mcp_name(name) and split_name(name)[0] in servers and split_name(name)[1])
        )

    def tools_named(self) -> set[str]:
        """Every tool name the file mentions, to catch typos."""
        names: set[str] = set()
        for rules in (self, *self.conversations.values()):
            names |= rules.tools.named() | set(rules.risk.safe_tools or ())
            names |= set(rules.approvals.quorum_tools)
            names |= {tool for hook in rules.hooks.values() for tool in hook.tools or ()}
        return names


class Override(BaseModel):
    """An admin's runtime change for one tool at one scope, stored in Redis over the file."""

    state: OverrideState
    by: str
    at: int  # ms since the epoch
    # The widest scope `by` is an admin of: only admins of that scope or a wider one may
    # change or reset this override.
    reach: str = GLOBAL


class Choice(BaseModel):
    """A conversation's `/mode` or `/model` choice, stored in Redis (runtime/policy/choices.py)."""

    value: str
    by: str
    at: int  # ms since the epoch


def override_state(action: str) -> OverrideState | None:
    """`/policy allow|deny|reset`: the override state to set, None to remove it."""
    if action == "allow":
        return "allow"
    if action == "deny":
        return "deny"
    if action == "reset":
        return None
    raise ValueError(f"unknown policy action {action!r}")
