"""clarify: a question back to the person who asked, with 2 to 6 options (and, when allowed,
their own words). It never runs as a tool: the approval middleware suspends every call of it
as a question that only the requester answers (runtime/approval/questions.py), durably like
an approval, and the answer becomes the call's result."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from runtime.redact import one_line
from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolError, ToolOutput

MAX_QUESTION = 500
MAX_OPTION = 75  # a Slack button's text holds 75 characters
MIN_OPTIONS, MAX_OPTIONS = 2, 6
# An option's number as typed or clicked: ASCII digits only (`int` fails on "²" and on
# thousands of digits, both `str.isdigit`).
_NUMBER = re.compile(r"[1-9][0-9]?")


def option_number(text: str) -> int | None:
    """The option number `text` is (1-based, not checked against the options), else None."""
    return int(text) if _NUMBER.fullmatch(text) else None


class ClarifyArgs(ToolArgs):
    question: str = Field(
        min_length=1, max_length=MAX_QUESTION, description="The question, in one or two lines."
    )
    options: list[str] = Field(
        min_length=MIN_OPTIONS,
        max_length=MAX_OPTIONS,
        description=f"{MIN_OPTIONS} to {MAX_OPTIONS} short, distinct answers to choose from.",
    )
    allow_other: bool = Field(
        False, description="Whether the person may answer in their own words instead."
    )

    @field_validator("question")
    @classmethod
    def _question(cls, question: str) -> str:
        if not question.strip():
            raise ValueError("the question is empty")
        return question.strip()

    @field_validator("options")
    @classmethod
    def _options(cls, options: list[str]) -> list[str]:
        cleaned = [" ".join(option.split()) for option in options]
        if not all(cleaned):
            raise ValueError("an option is empty")
        if any(len(option) > MAX_OPTION for option in cleaned):
            raise ValueError(f"an option is longer than {MAX_OPTION} characters")
        if len({option.casefold() for option in cleaned}) != len(cleaned):
            raise ValueError("the options are not distinct")
        for n, option in enumerate(cleaned, 1):
            # "2" answers with option 2: an option that reads as another's number is ambiguous.
            number = option_number(option)
            if number is not None and number != n and number <= len(cleaned):
                raise ValueError(
                    f"option {n} is {option!r}, the number of option {number}: "
                    "put it in that place or spell it out"
                )
        return cleaned


class ClarifyTool(Tool[ClarifyArgs]):
    name = "clarify"
    description = (
        "Ask the person who asked you a question with a few options (e.g. which environment), "
        "when you cannot go on without their choice. The run waits for their answer, which "
        "comes back as this call's result. Ask only when it matters; never for approval."
    )
    args_model = ClarifyArgs
    side_effect_free = True  # a question is no effect: asked again after a crash mid-way

    async def run(self, args: ClarifyArgs, ctx: ToolContext) -> ToolOutput:
        # Reached only by a chain without the approval middleware, which asks the question.
        raise ToolError("there is nobody to ask here; decide yourself or say what you need")

    def summarize(self, args: ClarifyArgs) -> str:
        return one_line(f"clarify: {args.question}")
