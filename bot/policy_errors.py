"""A policy file's validation errors as an admin can act on them: the file, the line, the key,
what is wrong, and for a key that does not exist the one most likely meant (instead of
pydantic's bare "Extra inputs are not permitted").

The line is found by reading the TOML text line by line (tables, arrays of tables, keys and
dotted keys); a key inside an inline table or a multi-line array is placed on the line of the
key that holds it."""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

Loc = tuple[str, ...]
# A bare or a quoted key, and the dot between the parts of a dotted one.
_KEY_PART = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[A-Za-z0-9_-]+)\s*(\.|$)')


def described(path: Path, text: str, model: type[BaseModel], exc: ValidationError) -> list[str]:
    """One line per error: `<file>:<line>: <key>: <what is wrong>[; did you mean <key>?]`."""
    lines = _key_lines(text)
    return [_line(path, lines, model, error) for error in exc.errors()]


def _line(path: Path, lines: Mapping[Loc, int], model: type[BaseModel], error: ErrorDetails) -> str:
    loc = tuple(str(part) for part in error["loc"])
    key = _shown(error["loc"]) or "(the whole file)"
    where = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
    said = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        said = "required, and missing"
    if error["type"] == "extra_forbidden":
        said = "no such key here"
        meant = difflib.get_close_matches(loc[-1], _fields_at(model, loc[:-1]), n=1)
        if meant:
            said += f"; did you mean {_shown([*error['loc'][:-1], meant[0]])}?"
    return f"{path}{f':{where}' if where else ''}: {key}: {said}"


def _shown(loc: Sequence[str | int]) -> str:
    """A key as TOML writes it: `conversations."slack:T1".risk`, `models[0].name`."""
    shown = ""
    for part in loc:
        if isinstance(part, int):
            shown += f"[{part}]"
        else:
            bare = re.fullmatch(r"[A-Za-z0-9_-]+", part)
            shown += ("." if shown else "") + (part if bare else f'"{part}"')
    return shown


def _key_lines(text: str) -> dict[Loc, int]:
    """Each table's and key's path → its line number (the first, 1-based)."""
    found: dict[Loc, int] = {}
    table: Loc = ()
    entries: dict[Loc, int] = {}  # an array of tables → the entries seen so far
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("[["):
            name = _path(line[2:].split("]]", 1)[0])
            entries[name] = entries.get(name, -1) + 1
            table = (*name, str(entries[name]))
        elif line.startswith("["):
            table = _path(line[1:].split("]", 1)[0])
        elif "=" in line and not line.startswith("#"):
            found.setdefault((*table, *_path(line.split("=", 1)[0])), number)
            continue
        else:
            continue
        found.setdefault(table, number)
    return found


def _path(dotted: str) -> Loc:
    parts: list[str] = []
    rest = dotted.strip()
    while rest:
        match = _KEY_PART.match(rest)
        if match is None:
            return tuple(parts)
        part = match.group(1)
        parts.append(part[1:-1] if part[0] in "\"'" else part)
        rest = rest[match.end() :]
    return tuple(parts)


def _fields_at(model: type[BaseModel], loc: Sequence[str]) -> list[str]:
    """The keys a table at `loc` may hold (a model's fields), [] when that cannot be told."""
    kind: Any = model
    for part in loc:
        kind = _inner(kind, part)
    kind = _model(kind)
    if kind is None:
        return []
    return [field.alias or name for name, field in kind.model_fields.items()]


def _inner(kind: Any, part: str) -> Any:
    """What `kind` holds at `part`: a model's field, a mapping's value, a list's item."""
    model = _model(kind)
    if model is not None:
        field = model.model_fields.get(part)
        return None if field is None else field.annotation
    origin, args = get_origin(kind), get_args(kind)
    if origin in (dict, Mapping) and len(args) == 2:
        return args[1]
    if origin in (list, Sequence) and args:
        return args[0]
    return None


def _model(kind: Any) -> type[BaseModel] | None:
    """The model `kind` is, or the one among a union's members (`X | None`)."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _model(get_args(kind)[0])
    if origin in (Union, types.UnionType):
        return next(filter(None, map(_model, get_args(kind))), None)
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None
