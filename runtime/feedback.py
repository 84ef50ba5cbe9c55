"""👍/👎 on an answer: one audit entry (who, which answer, the model) and a count per model."""

from __future__ import annotations

from runtime.audit import AuditLog
from runtime.metrics import FEEDBACK
from runtime.models import Actor, ConversationRef

VALUES = ("good", "bad")
THANKS = "Thanks for the feedback."


async def record_feedback(
    audit: AuditLog,
    model: str,
    actor: Actor,
    conversation: ConversationRef,
    value: str,
    answer: str,
    message: str,
) -> bool:
    """Record a click; False (nothing recorded) for a value that is neither good nor bad.
    `answer`: the answer's key; `message`: the platform's id of its message."""
    if value not in VALUES:
        return False
    await audit.record(
        "feedback",
        actor.key,
        value=value,
        model=model,
        answer=answer,
        message=message,
        conversation=conversation.id,
    )
    FEEDBACK.labels(model, value).inc()
    return True
