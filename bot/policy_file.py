"""The optional policy file (`clawgate.toml`): what admins decide, as opposed to how to run.
Read at start and again on change or SIGHUP (see bot/policy_reload.py)."""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from pathlib import Path

from pydantic import ValidationError

from bot.policy_errors import described
from runtime.policy.model import PolicyDocument


class PolicyFileError(Exception):
    """Every problem found, one per line."""


def load_policy_file(path: Path | None, tools: Collection[str] = ()) -> PolicyDocument:
    """The file's rules; `tools` (when given) are the tools the process knows, so a tool name
    with a typo is an error instead of a deny that silently denies nothing."""
    if path is None:
        return PolicyDocument()
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise PolicyFileError(f"{path}: cannot read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"{path}: not valid TOML ({exc})") from exc
    except UnicodeDecodeError:
        raise PolicyFileError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise PolicyFileError(f"{path}: nested too deeply") from None
    try:
        document = PolicyDocument.model_validate(data)
    except ValidationError as exc:
        raise PolicyFileError("\n".join(described(path, text, PolicyDocument, exc))) from exc
    unknown = document.unknown_tools(set(tools)) if tools else []
    if unknown:
        raise PolicyFileError(
            f"{path}: unknown tools {', '.join(unknown)} (tools: {', '.join(tools)}, and "
            "<server>.<tool> for the MCP servers the file configures)"
        )
    return document
