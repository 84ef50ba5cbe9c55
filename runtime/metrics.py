"""Prometheus counters the runtime keeps (served by `clawgate serve` at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter

RUNS = Counter("clawgate_runs", "Agent runs by the reason they stopped", ["stop_reason"])
APPROVALS = Counter(
    "clawgate_approvals",
    "Approval requests and what became of them: requested, approved, rejected, refused "
    "(an unauthorized or invalid decision attempt), expired, cancelled, outcome_unknown",
    ["outcome"],
)
DEDUPE_HITS = Counter(
    "clawgate_dedupe_hits", "Inputs dropped as redeliveries of one already queued", ["platform"]
)
INBOUND = Counter(
    "clawgate_inbound_requests",
    "HTTP requests from chat platforms by kind (event_callback, command, interactive, ...) and "
    "outcome (accepted, unauthorized, malformed, too_large, unavailable, unhandled, error)",
    ["platform", "kind", "outcome"],
)
