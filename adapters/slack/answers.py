"""The model's Markdown answer as Slack shows it: in a `markdown` block, which Slack renders
from standard Markdown (headings, bold, italic, links, lists, tables, code), with the text
escaped as plain message text for notifications.

In the block `<` goes as `&lt;` (Slack shows it as `<`): Slack reads `<@U…>`, `<!here>`
and `<url|label>` in a markdown block too, and an answer must not mention or alert anyone
nor hide a link's target. Links show their host (adapters/markdown.honest_links)."""

from __future__ import annotations

from typing import Any

from adapters.markdown import fitted, honest_links
from adapters.slack.text import MAX_TEXT, escape

MARKDOWN_LIMIT = 12_000  # characters of markdown blocks per message, all of them together
PIECE = 10_000  # characters of the answer per message, before escaping


def markdown_text(piece: str) -> str:
    return honest_links(piece).replace("<", "&lt;")


def answer_pieces(text: str) -> list[str]:
    """The answer cut between blocks into pieces whose markdown block fits a message."""
    return fitted(text, PIECE, lambda piece: len(markdown_text(piece)) <= MARKDOWN_LIMIT)


def answer_message(piece: str) -> dict[str, Any]:
    """chat.postMessage's `text` (notifications, screen readers) and `blocks` for a piece,
    and `instead`: the piece as plain text, should Slack refuse the block."""
    return {
        "text": escape(piece[:MAX_TEXT]),
        "blocks": [{"type": "markdown", "text": markdown_text(piece)}],
        "instead": {"text": escape(piece)},
    }


STEPS_SHOWN = 10  # tool calls listed under an answer; more are counted
STEPS_CHARS = 2_900  # of that list (a context block's text holds 3,000)


def steps_blocks(lines: list[str]) -> list[dict[str, Any]]:
    """A compact context block under an answer: the tool calls its run made (already
    escaped, one line each), the last STEPS_SHOWN of them."""
    if not lines:
        return []
    shown = lines[-STEPS_SHOWN:]
    if len(lines) > len(shown):
        shown.insert(0, f"… {len(lines) - len(shown)} more before")
    text = "\n".join(shown)[:STEPS_CHARS]
    return [{"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}]


FEEDBACK = "clawgate_feedback"  # the action id of the 👍/👎 buttons under a final answer
GOOD, BAD = "good", "bad"


def feedback_blocks(key: str) -> list[dict[str, Any]]:
    """👍/👎 under a final answer (Block Kit's feedback buttons); each button's value is
    `good|bad <answer key>`, what the click records."""

    def button(emoji: str, label: str, value: str) -> dict[str, Any]:
        return {
            "text": {"type": "plain_text", "text": emoji},
            "accessibility_label": label,
            "value": f"{value} {key}",
        }

    buttons = {
        "type": "feedback_buttons",
        "action_id": FEEDBACK,
        "positive_button": button("👍", "A good answer", GOOD),
        "negative_button": button("👎", "Not a good answer", BAD),
    }
    return [{"type": "context_actions", "elements": [buttons]}]
