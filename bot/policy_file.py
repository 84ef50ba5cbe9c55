"""The optional policy file (`clawgate.toml`): what admins decide, as opposed to how to run."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.approval.risk import RiskConfig


class ToolsPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # None: every enabled tool may run. A tool in `deny` never runs, even if also allowed.
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class ConversationPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approvers: list[str] = Field(default_factory=list)


class ApprovalsPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requester_may_approve: bool = False
    # Approvers for one conversation, keyed by its id (e.g. "slack:T123:C456").
    conversations: dict[str, ConversationPolicy] = Field(default_factory=dict)


class PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tools: ToolsPolicy = Field(default_factory=ToolsPolicy)
    risk: RiskConfig = Field(default_factory=RiskConfig)
    approvals: ApprovalsPolicy = Field(default_factory=ApprovalsPolicy)


class PolicyFileError(Exception):
    pass


def load_policy_file(path: Path | None) -> PolicyFile:
    if path is None:
        return PolicyFile()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyFileError(f"{path}: cannot read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"{path}: not valid TOML ({exc})") from exc
    try:
        return PolicyFile.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{path}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        ]
        raise PolicyFileError("\n".join(lines)) from exc
