"""Settings from the environment (pydantic-settings), and from a settings file for what the
environment does not set: `CLAWGATE_ENV_FILE`, else `.env` in the current directory, read only
when it lies outside the work dir (bot/settings_file.py). Bad values fail at start, one line
each."""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal, TextIO
from urllib.parse import urlsplit

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from adapters.long_answer import DEFAULT_FILE_CHARS
from adapters.reading import ReadingLimits
from adapters.thread_context import DEFAULT_CHARS, DEFAULT_MESSAGES, ContextLimits, Outsiders
from bot.settings_file import ENV_FILE_VARIABLE, FIX, SettingsFile, find_settings_file
from bot.worker_child import PARENT_VARIABLE
from runtime import evidence_keys
from runtime.attachments import DEFAULT_MAX_BYTES, DEFAULT_TYPES, AttachmentLimits
from runtime.audit_chain import DEFAULT_CHECKPOINT_EVERY, ChainConfig
from runtime.context.budget import DEFAULT_BUDGET, MIN_BUDGET
from runtime.evidence_keys import KeyRing
from runtime.executor import DEFAULT_MAX_PARALLEL
from runtime.repeats import DEFAULT_LIMIT as DEFAULT_REPEAT_LIMIT
from runtime.risk.exports import SCAN_BYTES
from runtime.tools.sandbox import NetworkAccess, SandboxMode, UnixSockets
from runtime.tools.send_file import DEFAULT_MAX_BYTES as SEND_FILE_MAX_BYTES

CommaList = Annotated[list[str], NoDecode]
# Where `clawgate serve` runs its worker: in a supervised child process (its agent runs never
# delay an acknowledgment), in its own event loop, or nowhere (a `clawgate worker` elsewhere).
WorkerMode = Literal["child", "inprocess", "none"]
# A cluster's default: several partitions per master of a 3-6 master cluster, so ingest
# spreads evenly (see runtime/store/keys.py), for 16 blocking reads per worker process.
CLUSTER_INBOX_PARTITIONS = 16
MAX_INBOX_PARTITIONS = 256  # each costs every worker a connection and a read loop
DEFAULT_POLICY_FILE = Path("clawgate.toml")


class SettingsError(Exception):
    """Every problem found, one per line."""


class Settings(BaseSettings):
    # The environment wins over the settings file (pydantic-settings' order), which
    # `load_settings` names only once it is known to lie outside the work dir.
    model_config = SettingsConfigDict(
        extra="ignore", populate_by_name=True, env_file=None, env_file_encoding="utf-8"
    )
    # Where each setting came from, for `clawgate doctor` (set by `load_settings`).
    _file: SettingsFile = PrivateAttr(default_factory=SettingsFile)
    _environment: frozenset[str] = PrivateAttr(default=frozenset())
    _unknown: tuple[str, ...] = PrivateAttr(default=())

    redis_url: str | None = Field(None, alias="REDIS_URL")
    redis_prefix: str = Field("clawgate", alias="CLAWGATE_REDIS_PREFIX", pattern=r"^[\w.:-]+$")
    # REDIS_URL names any node of a Redis Cluster: the cluster client everywhere.
    redis_cluster: bool = Field(False, alias="CLAWGATE_REDIS_CLUSTER")
    # How many streams the inbox spreads over (each with its lanes on one slot); None: 1 on a
    # single Redis, CLUSTER_INBOX_PARTITIONS on a cluster. Every process must agree.
    inbox_partitions: int | None = Field(
        None, alias="CLAWGATE_INBOX_PARTITIONS", ge=1, le=MAX_INBOX_PARTITIONS
    )
    openai_api_key: SecretStr | None = Field(None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(None, alias="OPENAI_BASE_URL")
    model: str = Field("gpt-4o-mini", alias="CLAWGATE_MODEL", min_length=1)
    model_timeout: float = Field(120.0, alias="CLAWGATE_MODEL_TIMEOUT", gt=0)
    # The model takes images: attached ones go to it as image parts (else only their names).
    model_images: bool = Field(False, alias="CLAWGATE_MODEL_IMAGES")
    # Thread context (adapters/thread_context.py): the earlier messages the model is given
    # when mentioned in a thread, at most this many and this many characters; people the
    # access list leaves out are marked, or their messages left out.
    thread_context_messages: int = Field(
        DEFAULT_MESSAGES, alias="CLAWGATE_THREAD_CONTEXT_MESSAGES", ge=0, le=1000
    )
    thread_context_chars: int = Field(
        DEFAULT_CHARS, alias="CLAWGATE_THREAD_CONTEXT_CHARS", ge=0, le=1_000_000
    )
    thread_context_outsiders: Outsiders = Field("mark", alias="CLAWGATE_THREAD_CONTEXT_OUTSIDERS")
    # Files people attach (runtime/attachments.py): the largest taken, and the MIME types.
    attachment_max_bytes: int = Field(
        DEFAULT_MAX_BYTES, alias="CLAWGATE_ATTACHMENT_MAX_BYTES", ge=1, le=1024**3
    )
    attachment_types: CommaList = Field(
        default_factory=lambda: list(DEFAULT_TYPES), alias="CLAWGATE_ATTACHMENT_TYPES"
    )
    # An answer longer than this comes to Slack and Feishu as its beginning plus the whole
    # of it as a file (adapters/long_answer.py); 0: always as messages.
    answer_file_chars: int = Field(
        DEFAULT_FILE_CHARS, alias="CLAWGATE_ANSWER_FILE_CHARS", ge=0, le=10_000_000
    )
    # Ask the model server to stream answers (shown while written in Slack and Feishu).
    stream: bool = Field(True, alias="CLAWGATE_STREAM")
    host: str = Field("127.0.0.1", alias="CLAWGATE_HOST")
    port: int = Field(8080, alias="CLAWGATE_PORT", ge=1, le=65535)
    workdir: Path = Field(default_factory=Path.cwd, alias="CLAWGATE_WORKDIR")
    # The web console under /console/ (docs/console.md), and the address people reach
    # `serve` at (its sign-in links name it); None: http://CLAWGATE_HOST:CLAWGATE_PORT.
    console: Literal["on", "off"] = Field("on", alias="CLAWGATE_CONSOLE")
    public_url: str | None = Field(None, alias="CLAWGATE_PUBLIC_URL")
    # The settings file to read, named in the environment (bot/settings_file.py decides
    # whether it is read; `settings_file` is the outcome).
    env_file: Path | None = Field(None, alias="CLAWGATE_ENV_FILE")
    policy_file: Path | None = Field(None, alias="CLAWGATE_POLICY_FILE")
    enabled_tools: CommaList = Field(
        default_factory=lambda: ["read", "write", "edit", "bash", "send_file", "clarify"],
        alias="CLAWGATE_ENABLED_TOOLS",
    )
    # The largest file send_file posts (Feishu takes files up to 30 MB, images up to 10 MB).
    send_file_max_bytes: int = Field(
        SEND_FILE_MAX_BYTES, alias="CLAWGATE_SEND_FILE_MAX_BYTES", ge=1, le=SCAN_BYTES
    )
    admins: CommaList = Field(default_factory=list, alias="CLAWGATE_ADMINS")
    approvers: CommaList = Field(default_factory=list, alias="CLAWGATE_APPROVERS")
    approval_timeout: float = Field(
        3600, alias="CLAWGATE_APPROVAL_TIMEOUT", gt=0, le=30 * 86_400, allow_inf_nan=False
    )
    # Approvals one person may have pending at once; a request beyond it is refused, not run.
    max_pending_per_user: int = Field(20, alias="CLAWGATE_MAX_PENDING_PER_USER", ge=1, le=10_000)
    liveness_ttl: float = Field(2.5, alias="CLAWGATE_LIVENESS_TTL", ge=1)
    max_steps: int = Field(12, alias="CLAWGATE_MAX_STEPS", ge=1, le=200)
    max_tool_result_chars: int = Field(16_000, alias="CLAWGATE_MAX_TOOL_RESULT_CHARS", ge=200)
    max_message_chars: int = Field(100_000, alias="CLAWGATE_MAX_MESSAGE_CHARS", ge=1)
    # A run stops when the same call gets the same outcome this many times in a row (0: never);
    # the tools never counted, besides those marked polling (runtime/repeats.py).
    repeat_limit: int = Field(DEFAULT_REPEAT_LIMIT, alias="CLAWGATE_REPEAT_LIMIT", ge=0, le=1000)
    polling_tools: CommaList = Field(default_factory=list, alias="CLAWGATE_POLLING_TOOLS")
    # Read-only calls of one model turn run side by side (at most this many at once), or not.
    parallel_tools: bool = Field(True, alias="CLAWGATE_PARALLEL_TOOLS")
    max_parallel_tools: int = Field(
        DEFAULT_MAX_PARALLEL, alias="CLAWGATE_MAX_PARALLEL_TOOLS", ge=1, le=256
    )
    # Characters of a conversation the model is sent; older turns are compacted into a summary.
    context_budget: int = Field(
        DEFAULT_BUDGET, alias="CLAWGATE_CONTEXT_BUDGET", ge=MIN_BUDGET, le=10_000_000
    )
    bash_timeout: float = Field(60.0, alias="CLAWGATE_BASH_TIMEOUT", gt=0, le=3600)
    bash_output_limit: int = Field(256_000, alias="CLAWGATE_BASH_OUTPUT_LIMIT", ge=1024)
    # The OS boundary of bash commands: bwrap when it works (auto), required, or off.
    sandbox: SandboxMode = Field(SandboxMode.AUTO, alias="CLAWGATE_SANDBOX")
    sandbox_network: NetworkAccess = Field(NetworkAccess.APPROVED, alias="CLAWGATE_SANDBOX_NETWORK")
    sandbox_unix_sockets: UnixSockets = Field(
        UnixSockets.NEVER, alias="CLAWGATE_SANDBOX_UNIX_SOCKETS"
    )
    log_level: str = Field("WARNING", alias="CLAWGATE_LOG_LEVEL")
    log_format: Literal["text", "json"] = Field("text", alias="CLAWGATE_LOG_FORMAT")
    # Serving: the inbox and its workers.
    # Where `serve`'s worker runs (WorkerMode); None: child with REDIS_URL, else inprocess
    # (the embedded store lives in one process). Filled in by `_worker_mode`.
    worker_mode: WorkerMode | None = Field(None, alias="CLAWGATE_WORKER_MODE")
    # Deprecated alias of CLAWGATE_WORKER_MODE: true is inprocess, false is none.
    inprocess_worker: bool | None = Field(None, alias="CLAWGATE_INPROCESS_WORKER")
    worker_concurrency: int = Field(64, alias="CLAWGATE_WORKER_CONCURRENCY", ge=1, le=10_000)
    reclaim_idle: float = Field(30.0, alias="CLAWGATE_RECLAIM_IDLE", ge=1)
    dedupe_ttl: float = Field(86_400, alias="CLAWGATE_DEDUPE_TTL", ge=8 * 3600)
    # fsync: an input is acknowledged to the platform only once it is on Redis's disk.
    ingest_durability: Literal["default", "fsync"] = Field(
        "default", alias="CLAWGATE_INGEST_DURABILITY"
    )
    shutdown_grace: float = Field(20.0, alias="CLAWGATE_SHUTDOWN_GRACE", ge=0)
    # steer: the requester's messages sent while their run works join it at its next model
    # step; queue: they wait for the run to end, each its own run.
    steering: Literal["steer", "queue"] = Field("steer", alias="CLAWGATE_STEERING")
    # What one client can hold of the HTTP server (bot/http_limits.py): seconds for request
    # headers (also the idle keep-alive), for a body, and connections open at once.
    http_header_timeout: float = Field(10.0, alias="CLAWGATE_HTTP_HEADER_TIMEOUT", gt=0, le=600)
    http_body_timeout: float = Field(10.0, alias="CLAWGATE_HTTP_BODY_TIMEOUT", gt=0, le=600)
    http_client_connections: int = Field(
        64, alias="CLAWGATE_HTTP_CLIENT_CONNECTIONS", ge=1, le=100_000
    )
    http_max_connections: int = Field(
        512, alias="CLAWGATE_HTTP_MAX_CONNECTIONS", ge=1, le=1_000_000
    )
    metrics_port: int | None = Field(None, alias="CLAWGATE_METRICS_PORT", ge=1, le=65535)
    # Tracing: off, metadata (no prompt/argument/output text) or replay (redacted, truncated).
    trace_mode: Literal["off", "metadata", "replay"] = Field(
        "metadata", alias="CLAWGATE_TRACE_MODE"
    )
    trace_ttl: int = Field(7 * 24 * 3600, alias="CLAWGATE_TRACE_TTL", ge=60)
    # Characters kept of each replay payload (the text is cut there, saying so).
    trace_payload_chars: int = Field(
        2_000, alias="CLAWGATE_TRACE_PAYLOAD_CHARS", ge=200, le=1_000_000
    )
    # The global audit trail keeps about the newest N entries (trimmed approximately).
    audit_maxlen: int = Field(100_000, alias="CLAWGATE_AUDIT_MAXLEN", ge=1000)
    # The keys of the audit chain and tool receipts (runtime/evidence_keys.py): never in Redis.
    audit_key: SecretStr | None = Field(None, alias="CLAWGATE_AUDIT_KEY")
    audit_key_file: Path | None = Field(None, alias="CLAWGATE_AUDIT_KEY_FILE")
    # The audit chain adds a signed checkpoint every N entries, also appended as a JSON line to
    # the file when set (a copy outside Redis for `clawgate audit verify --checkpoints`).
    audit_checkpoint_every: int = Field(
        DEFAULT_CHECKPOINT_EVERY, alias="CLAWGATE_AUDIT_CHECKPOINT_EVERY", ge=10
    )
    audit_checkpoint_file: Path | None = Field(None, alias="CLAWGATE_AUDIT_CHECKPOINT_FILE")
    # Slack: enabled when SLACK_BOT_TOKEN is set.
    slack_bot_token: SecretStr | None = Field(None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(
        "https://slack.com/api/", alias="SLACK_API_URL", pattern=r"^https?://\S+/$"
    )
    # Feishu / Lark: enabled when FEISHU_APP_ID is set.
    feishu_app_id: str | None = Field(None, alias="FEISHU_APP_ID", min_length=1)
    feishu_app_secret: SecretStr | None = Field(None, alias="FEISHU_APP_SECRET")
    feishu_verification_token: SecretStr | None = Field(None, alias="FEISHU_VERIFICATION_TOKEN")
    feishu_encrypt_key: SecretStr | None = Field(None, alias="FEISHU_ENCRYPT_KEY")
    feishu_domain: str = Field("https://open.feishu.cn", alias="FEISHU_DOMAIN")
    feishu_mode: Literal["webhook", "websocket"] = Field("webhook", alias="FEISHU_MODE")
    # Answers streamed into a CardKit card; false: a text working message and the answer apart.
    feishu_streaming_cards: bool = Field(True, alias="FEISHU_STREAMING_CARDS")

    @field_validator(
        "enabled_tools", "admins", "approvers", "attachment_types", "polling_tools", mode="before"
    )
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("admins", "approvers")
    @classmethod
    def _platform_ids(cls, value: list[str]) -> list[str]:
        bad = [item for item in value if not re.fullmatch(r"[a-z]+:[^\s:]+", item)]
        if bad:
            raise ValueError(f"expected platform:user entries like slack:U123, got {bad}")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        scheme, _, rest = value.partition("://")
        if scheme not in ("redis", "rediss", "unix") or not rest:
            raise ValueError(
                "expected redis://host:6379/0, rediss://… (TLS) or unix:///path/to/redis.sock"
            )
        _port(value)
        return value

    @field_validator("openai_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
            raise ValueError("expected an http(s) URL like https://api.openai.com/v1")
        _port(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _public_origin(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        # An origin: the console's pages link to /console/… from the root.
        if not re.fullmatch(r"https?://[^\s/?#@]+", value):
            raise ValueError(
                "expected the origin people open, like https://clawgate.example.com (no path)"
            )
        _port(value)
        return value

    @property
    def console_url(self) -> str:
        """Where sign-in links point: CLAWGATE_PUBLIC_URL, else this server's own address."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return self.public_url or f"http://{host}:{self.port}"

    @field_validator("feishu_domain")
    @classmethod
    def _bare_origin(cls, value: str) -> str:
        # What lark-oapi accepts: an origin, plain http only for this machine.
        local = r"http://(127\.0\.0\.1|localhost|\[::1\])"
        if not re.fullmatch(rf"(https://[\w.-]+|{local})(:\d+)?", value):
            raise ValueError(
                "expected an origin like https://open.feishu.cn or https://open.larksuite.com "
                "(no path; http only for 127.0.0.1 or localhost)"
            )
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
        return level

    @field_validator("workdir")
    @classmethod
    def _existing_dir(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"{value} is not an existing directory")
        return value.resolve()

    @field_validator("policy_file")
    @classmethod
    def _existing_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} does not exist")
        return value

    @model_validator(mode="after")
    def _audit_keys(self) -> Settings:
        self.evidence_keys()  # a bad key fails at start, not at the first audit entry
        return self

    def evidence_keys(self) -> KeyRing:
        """The audit chain's and receipts' key ring (unkeyed when no key is set)."""
        secret = self.audit_key.get_secret_value() if self.audit_key else None
        try:
            return evidence_keys.load(secret, self.audit_key_file)
        except evidence_keys.AuditKeyError as exc:
            raise ValueError(str(exc)) from None

    def audit_chain(self) -> ChainConfig:
        """How this process seals the audit trail's entries (runtime/audit_chain.py)."""
        return ChainConfig(
            self.evidence_keys(), self.audit_checkpoint_every, self.audit_checkpoint_file
        )

    @model_validator(mode="after")
    def _default_policy_file(self) -> Settings:
        if self.policy_file is None and DEFAULT_POLICY_FILE.is_file():
            self.policy_file = DEFAULT_POLICY_FILE.resolve()
        return self

    @model_validator(mode="after")
    def _slack_credentials(self) -> Settings:
        token, app_token = self.slack_bot_token, self.slack_app_token
        problems = []
        if token is None and (self.slack_signing_secret or app_token):
            problems.append("SLACK_BOT_TOKEN: required when other SLACK_* settings are set")
        if token is not None and not token.get_secret_value().startswith("xoxb-"):
            problems.append("SLACK_BOT_TOKEN: expected a bot token starting with xoxb-")
        if app_token is not None and not app_token.get_secret_value().startswith("xapp-"):
            problems.append("SLACK_APP_TOKEN: expected an app-level token starting with xapp-")
        if token is not None and self.slack_signing_secret is None and app_token is None:
            problems.append(
                "SLACK_SIGNING_SECRET: required to receive Slack requests over HTTP "
                "(or set SLACK_APP_TOKEN for Socket Mode)"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @model_validator(mode="after")
    def _worker_mode(self) -> Settings:
        alias = None if self.inprocess_worker is None else _ALIAS_MODE[self.inprocess_worker]
        if self.worker_mode is not None and alias is not None and alias != self.worker_mode:
            raise ValueError(
                f"CLAWGATE_INPROCESS_WORKER (deprecated: {alias}) contradicts "
                f"CLAWGATE_WORKER_MODE={self.worker_mode}: keep only CLAWGATE_WORKER_MODE"
            )
        mode = self.worker_mode or alias or ("child" if self.redis_url else "inprocess")
        if mode != "inprocess" and not self.redis_url:
            raise ValueError(
                f"CLAWGATE_WORKER_MODE: {mode} needs REDIS_URL (the worker in another process "
                "must share the queue; the embedded store lives in this process)"
            )
        self.worker_mode = mode
        return self

    @property
    def worker_topology(self) -> WorkerMode:
        """Where `serve`'s worker runs, settled (CLAWGATE_WORKER_MODE or its default)."""
        assert self.worker_mode is not None  # set by _worker_mode
        return self.worker_mode

    @model_validator(mode="after")
    def _cluster_url(self) -> Settings:
        # Without REDIS_URL the flag has nothing to say: the embedded store (which says so).
        if not self.redis_cluster or not self.redis_url:
            return self
        if self.redis_url.startswith("unix:"):
            raise ValueError("REDIS_URL: a Redis Cluster is reached over TCP, not unix://")
        if urlsplit(self.redis_url).path not in ("", "/", "/0"):
            raise ValueError("REDIS_URL: a Redis Cluster has database 0 only (…:6379/0)")
        return self

    @model_validator(mode="after")
    def _feishu_credentials(self) -> Settings:
        problems = []
        others = (self.feishu_app_secret, self.feishu_verification_token, self.feishu_encrypt_key)
        if self.feishu_app_id is None:
            if any(others):
                problems.append("FEISHU_APP_ID: required when other FEISHU_* settings are set")
        else:
            if self.feishu_app_secret is None:
                problems.append("FEISHU_APP_SECRET: required with FEISHU_APP_ID")
            if self.feishu_mode == "webhook":
                # Without both, anyone who finds the URL could inject events.
                for name, value in (
                    ("FEISHU_ENCRYPT_KEY", self.feishu_encrypt_key),
                    ("FEISHU_VERIFICATION_TOKEN", self.feishu_verification_token),
                ):
                    if value is None or not value.get_secret_value():
                        problems.append(
                            f"{name}: required for FEISHU_MODE=webhook (every request is "
                            "decrypted and checked with it); or use FEISHU_MODE=websocket"
                        )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def feishu_enabled(self) -> bool:
        return self.feishu_app_id is not None

    @property
    def slack_enabled(self) -> bool:
        return self.slack_bot_token is not None

    @property
    def parallel_calls(self) -> int:
        """Parallel-safe calls run at once, at most: 1 with CLAWGATE_PARALLEL_TOOLS off."""
        return self.max_parallel_tools if self.parallel_tools else 1

    @property
    def partitions(self) -> int:
        """The inbox partitions in effect (CLAWGATE_INBOX_PARTITIONS or its default)."""
        if self.inbox_partitions is not None:
            return self.inbox_partitions
        return CLUSTER_INBOX_PARTITIONS if self.redis_cluster else 1

    def reading_limits(self) -> ReadingLimits:
        """What the platforms' readers take of a thread and of attached files."""
        return ReadingLimits(
            self.workdir,
            ContextLimits(
                self.thread_context_messages,
                self.thread_context_chars,
                self.thread_context_outsiders,
            ),
            AttachmentLimits(self.attachment_max_bytes, tuple(self.attachment_types)),
        )

    @property
    def uses_demo_model(self) -> bool:
        return self.openai_api_key is None and not self.openai_base_url

    @property
    def settings_file(self) -> SettingsFile:
        return self._file

    @classmethod
    def variables(cls) -> list[str]:
        """Every setting's variable name, in the order of the fields."""
        return [info.alias or name.upper() for name, info in cls.model_fields.items()]

    @property
    def unknown(self) -> tuple[str, ...]:
        """A line for each CLAWGATE_ variable set that is no setting (a typo, most likely)."""
        return self._unknown

    def source(self, name: str) -> str:
        """Where the setting `name` (its variable, e.g. CLAWGATE_SANDBOX) came from."""
        if name.upper() in self._environment:
            return "environment"
        if self._file.path is not None and name.upper() in self._file.values:
            return str(self._file.path)
        return "default"


_ALIAS_MODE: dict[bool, WorkerMode] = {True: "inprocess", False: "none"}
DEPRECATED_INPROCESS_WORKER = (
    "CLAWGATE_INPROCESS_WORKER is deprecated: use CLAWGATE_WORKER_MODE "
    "(true is inprocess, false is none; the default with REDIS_URL is child)"
)


def _port(url: str) -> None:
    try:
        urlsplit(url).port  # noqa: B018 - raises for a port that is no number or out of range
    except ValueError as exc:
        raise ValueError(f"bad port in {url!r} ({exc})") from None


# CLAWGATE_ variables read elsewhere that are no setting: serve's pid in its worker child;
# the bench's profiler switch (bot/bench/platforms.py).
NOT_SETTINGS = frozenset({PARENT_VARIABLE, "CLAWGATE_BENCH_PROFILE"})
PREFIX = len("CLAWGATE_")


def unknown_variables(names: Iterable[str], where: str) -> list[str]:
    """A line for each CLAWGATE_ variable among `names` that clawgate does not read, with the
    setting it most likely meant: unnoticed, a typo (CLAWGATE_MODLE) would leave the default
    in force."""
    known = Settings.variables()
    lines = []
    for name in sorted({name.upper() for name in names}):
        if not name.startswith("CLAWGATE_") or name in known or name in NOT_SETTINGS:
            continue
        # Compared without the prefix all of them share, which alone would look alike.
        near = difflib.get_close_matches(name[PREFIX:], [k[PREFIX:] for k in known], 1, 0.75)
        meant = f"; did you mean CLAWGATE_{near[0]}?" if near else ""
        lines.append(f"{name} {where} is not a setting and is ignored{meant}")
    return lines


def _problems(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        if not err["loc"]:  # a check across settings names its settings itself
            lines.extend(err["msg"].removeprefix("Value error, ").splitlines())
            continue
        name = ".".join(str(p) for p in err["loc"])
        lines.append(f"{name}: {err['msg'].removeprefix('Value error, ')}")
    return lines


# The chat platforms' settings, which `clawgate chat` does not use.
PLATFORM_FIELDS = (
    "slack_bot_token",
    "slack_signing_secret",
    "slack_app_token",
    "feishu_app_id",
    "feishu_app_secret",
    "feishu_verification_token",
    "feishu_encrypt_key",
)


def load_settings(warnings: TextIO = sys.stderr, platforms: bool = True) -> Settings:
    """The settings of this process; why a settings file was ignored goes to `warnings`.
    Without `platforms` (the terminal chat), incomplete Slack or Feishu settings are left
    out, said, instead of stopping the process."""
    found = find_settings_file(os.environ, Path.cwd(), Settings.variables())
    if found.missing:
        raise SettingsError(f"{ENV_FILE_VARIABLE}: {found.missing} does not exist")
    if found.ignored:
        warnings.write(f"clawgate: {found.ignored}; {FIX}\n")
        warnings.flush()
    try:
        settings = Settings(_env_file=found.path)
    except ValidationError as exc:
        problems = _problems(exc)
        if platforms or not all(line.startswith(("SLACK_", "FEISHU_")) for line in problems):
            raise SettingsError("\n".join(problems)) from exc
        for line in problems:
            warnings.write(f"clawgate: the chat platforms' settings are not used here: {line}\n")
        settings = Settings(_env_file=found.path, **dict.fromkeys(PLATFORM_FIELDS))
    if settings.inprocess_worker is not None:
        warnings.write(f"clawgate: {DEPRECATED_INPROCESS_WORKER}\n")
        warnings.flush()
    settings._file = found
    settings._environment = frozenset(name.upper() for name in os.environ)
    settings._unknown = (
        *unknown_variables(os.environ, "(in the environment)"),
        *unknown_variables(found.values, f"(in {found.path})"),
    )
    for line in settings.unknown:
        warnings.write(f"clawgate: {line}\n")
    warnings.flush()
    return settings
