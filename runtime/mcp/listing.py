"""One tool as an MCP server lists it, checked before clawgate trusts any of it: a usable name,
an input schema that is a valid JSON Schema of bounded size (compiled once, to validate every
call's arguments), the two annotations that may matter (readOnlyHint, destructiveHint), and
its signature: a digest of what the tool is, so that a call approved, or an "approve always"
granted, for one version of the tool never covers another."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from runtime.canonical import RUNTIME_MARKERS, canonical_json

# MCP's own rule for tool names (SEP-986), which also keeps them printable and short.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
MAX_SCHEMA_CHARS = 64_000  # a schema is validated against every call: bounded work
MAX_DESCRIPTION_CHARS = 4_000  # what the model reads of a tool's description
SIGNATURE_CHARS = 10


class Unusable(ValueError):
    """Why a listed tool cannot be offered (said in the server's state and the logs)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A listed tool, checked. `signature` changes whenever its schema or annotations do."""

    name: str  # as the server calls it
    description: str
    schema: dict[str, Any]
    read_only: bool | None
    destructive: bool | None
    signature: str
    validator: Validator


def listed(tool: Any) -> Listed:
    """A tool from the server's `tools/list` (an SDK `Tool`), or `Unusable` with why."""
    name = str(tool.name)
    if not _TOOL_NAME.match(name):
        raise Unusable(f"tool name {name[:80]!r} is not a valid MCP tool name")
    schema = tool.input_schema
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise Unusable(f"{name}: its input schema does not describe a JSON object")
    text = canonical_json(schema)
    if len(text) > MAX_SCHEMA_CHARS:
        raise Unusable(f"{name}: its input schema is over {MAX_SCHEMA_CHARS} characters")
    properties = schema.get("properties")
    named = set(properties) if isinstance(properties, dict) else set()
    clash = sorted(p for p in named if p in RUNTIME_MARKERS or str(p).startswith("_"))
    if clash:
        raise Unusable(f"{name}: it uses argument names clawgate owns ({', '.join(clash)})")
    try:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
        validator = cls(schema)
    except SchemaError as exc:
        raise Unusable(f"{name}: its input schema is invalid ({exc.message[:200]})") from None
    if getattr(getattr(tool, "execution", None), "task_support", None) == "required":
        # A task-augmented call returns a task to poll, not a result: clawgate makes none.
        raise Unusable(f"{name}: it runs only as an MCP task, which clawgate does not support")
    annotations = tool.annotations
    read_only = getattr(annotations, "read_only_hint", None)
    destructive = getattr(annotations, "destructive_hint", None)
    digest = hashlib.sha256(
        canonical_json(
            {"name": name, "schema": schema, "read_only": read_only, "destructive": destructive}
        ).encode()
    ).hexdigest()
    description = str(tool.description or tool.title or name)[:MAX_DESCRIPTION_CHARS]
    return Listed(
        name=name,
        description=description,
        schema=schema,
        read_only=read_only if isinstance(read_only, bool) else None,
        destructive=destructive if isinstance(destructive, bool) else None,
        signature=digest[:SIGNATURE_CHARS],
        validator=validator,
    )
