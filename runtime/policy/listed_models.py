"""The models admins list in the policy file (`[[models]]`), which a conversation may switch
to with `/model <name>`; without a switch it uses the process's own model (CLAWGATE_MODEL)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime.context.budget import MIN_BUDGET

DEFAULT_MODEL = "default"  # the name of the process's own model (CLAWGATE_MODEL, OPENAI_*)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CHARS_PER_TOKEN = 4
MAX_BUDGET = 10_000_000  # characters, as CLAWGATE_CONTEXT_BUDGET's limit


class ListedModel(BaseModel):
    """One `[[models]]` entry: an OpenAI-compatible endpoint and the model it serves there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # what people type: /model <name>
    base_url: str
    # The name of the environment variable that holds the key, never the key itself.
    api_key_env: str
    model: str = Field(min_length=1)  # the model id the server knows
    context_window: int = Field(ge=4_096, le=10_000_000)  # tokens
    images: bool = False  # whether attached images are sent to it
    enabled: bool = True  # false: kept in the file, not offered (nor probed)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(f"invalid model name {name!r}: 1-40 letters, digits, '.', '_' or '-'")
        if name == DEFAULT_MODEL:
            raise ValueError(f"{DEFAULT_MODEL!r} names the process's own model (CLAWGATE_MODEL)")
        return name

    @field_validator("base_url")
    @classmethod
    def _url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL like https://api.openai.com/v1, got {url!r}")
        return url

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, name: str) -> str:
        if not _ENV.match(name):
            # Not echoed: it may be the key itself, put there by mistake.
            raise ValueError(
                "expected the name of an environment variable (like OPENAI_API_KEY); never "
                "the key itself"
            )
        return name

    @property
    def context_budget(self) -> int:
        """Characters of history a run sends it: half its window (the rest is for the system
        prompt, the tools and the answer), at about 4 characters a token."""
        return max(MIN_BUDGET, min(MAX_BUDGET, self.context_window * CHARS_PER_TOKEN // 2))


def check_unique(models: list[ListedModel]) -> list[ListedModel]:
    names = [m.name for m in models]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"model names listed twice: {', '.join(twice)}")
    return models
