"""What one peer round measured, and the error when a peer's library is not installed."""

from __future__ import annotations

from dataclasses import dataclass

from bot.settings import SettingsError

PEERS_EXTRA = 'pip install "clawgate[peers]" (openai-agents langgraph langgraph-checkpoint-sqlite)'


@dataclass(frozen=True)
class PeerSample:
    """One round of a peer, in ms: `ask` is a message in until durably suspended (the run to
    its interruption and the save); `save` is the save alone (serialize and write), the part
    clawgate's own suspension step corresponds to; `resume` is load, approve, the tool, the
    run to its final answer and the turn kept. `stored`: bytes written for the suspension."""

    ask: float
    save: float
    resume: float
    stored: int


def missing_peer(package: str) -> SettingsError:
    return SettingsError(f"`clawgate bench approval --peers` needs {package}: {PEERS_EXTRA}")
