"""Settings from the environment (pydantic-settings). Bad values fail at start, one line each."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

CommaList = Annotated[list[str], NoDecode]
DEFAULT_POLICY_FILE = Path("clawgate.toml")


class SettingsError(Exception):
    """Every problem found, one per line."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    redis_url: str | None = Field(None, alias="REDIS_URL")
    redis_prefix: str = Field("clawgate", alias="CLAWGATE_REDIS_PREFIX", pattern=r"^[\w.:-]+$")
    openai_api_key: SecretStr | None = Field(None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(None, alias="OPENAI_BASE_URL")
    model: str = Field("gpt-4o-mini", alias="CLAWGATE_MODEL", min_length=1)
    model_timeout: float = Field(120.0, alias="CLAWGATE_MODEL_TIMEOUT", gt=0)
    host: str = Field("127.0.0.1", alias="CLAWGATE_HOST")
    port: int = Field(8080, alias="CLAWGATE_PORT", ge=1, le=65535)
    workdir: Path = Field(default_factory=Path.cwd, alias="CLAWGATE_WORKDIR")
    policy_file: Path | None = Field(None, alias="CLAWGATE_POLICY_FILE")
    enabled_tools: CommaList = Field(
        default_factory=lambda: ["read", "write", "edit", "bash"], alias="CLAWGATE_ENABLED_TOOLS"
    )
    admins: CommaList = Field(default_factory=list, alias="CLAWGATE_ADMINS")
    approvers: CommaList = Field(default_factory=list, alias="CLAWGATE_APPROVERS")
    approval_timeout: float = Field(3600, alias="CLAWGATE_APPROVAL_TIMEOUT", gt=0)
    liveness_ttl: float = Field(30, alias="CLAWGATE_LIVENESS_TTL", ge=1)
    max_steps: int = Field(12, alias="CLAWGATE_MAX_STEPS", ge=1, le=200)
    max_tool_result_chars: int = Field(16_000, alias="CLAWGATE_MAX_TOOL_RESULT_CHARS", ge=200)
    bash_timeout: float = Field(60.0, alias="CLAWGATE_BASH_TIMEOUT", gt=0, le=3600)
    bash_output_limit: int = Field(256_000, alias="CLAWGATE_BASH_OUTPUT_LIMIT", ge=1024)
    log_level: str = Field("WARNING", alias="CLAWGATE_LOG_LEVEL")

    @field_validator("enabled_tools", "admins", "approvers", mode="before")
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
    def _default_policy_file(self) -> Settings:
        if self.policy_file is None and DEFAULT_POLICY_FILE.is_file():
            self.policy_file = DEFAULT_POLICY_FILE.resolve()
        return self

    @property
    def uses_demo_model(self) -> bool:
        return self.openai_api_key is None and not self.openai_base_url


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            lines.append(f"{name}: {err['msg']}")
        raise SettingsError("\n".join(lines)) from exc
