"""The console's templates keep autoescape's promise: none turns it off, none marks data as
markup, none builds attributes from data with `xmlattr` (whose keys bypassed escaping:
CVE-2024-22195), and every attribute holding data is quoted (an unquoted one is broken out
of by a space). The one exception is a chart, which adapters/web/charts.py escapes itself."""

from __future__ import annotations

import re
from pathlib import Path

from adapters.web import render

TEMPLATES = Path(render.__file__).parent / "templates"
# `|safe` (or Markup) is allowed on these expressions only: markup the code escaped itself.
SAFE_EXPRESSIONS = re.compile(r"\bchart\w*\b")


def sources() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(TEMPLATES.glob("*.html"))}


def test_autoescape_is_on_for_every_template() -> None:
    env = render._ENV
    assert env.autoescape is True
    rendered = env.from_string("{{ x }}").render(x='<img src=x onerror="alert(1)">')
    assert rendered == "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;"


def test_no_template_turns_escaping_off_or_builds_attributes_from_data() -> None:
    for name, text in sources().items():
        assert "autoescape false" not in text.replace("  ", " ").lower(), name
        assert "xmlattr" not in text, name
        assert "Markup" not in text, name
        for expression in re.findall(r"{{(.*?)\|\s*safe\b", text, re.S):
            assert SAFE_EXPRESSIONS.search(expression), f"{name}: |safe on {expression!r}"


def test_every_attribute_holding_data_is_quoted() -> None:
    unquoted = re.compile(r"""\s[\w-]+=(?!["'])[^\s>]*{{""")
    for name, text in sources().items():
        assert not unquoted.search(text), f"{name}: {unquoted.search(text)}"


def test_every_template_parses() -> None:
    for name in sources():
        render._ENV.get_template(name)  # a syntax error fails here, not on a page
