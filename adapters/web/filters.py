"""The filters of the console's lists: each row has its facts (name -> value), a filter set to
a value keeps the rows with that value, and a filter's choices are the values the rows have."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def matches(facts: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """Whether a row's facts have every value asked for (a filter left empty keeps all)."""
    return all(facts.get(name) == value for name, value in wanted.items() if value)


def choices(rows: Iterable[Mapping[str, str]], names: Sequence[str]) -> dict[str, list[str]]:
    """Each filter's values among the rows, sorted."""
    listed = list(rows)
    return {name: sorted({row[name] for row in listed if row.get(name)}) for name in names}
