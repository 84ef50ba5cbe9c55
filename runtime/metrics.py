"""Prometheus counters the runtime keeps (served by `clawgate serve` at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
TOOL_CALLS = Counter(
    "clawgate_tool_calls", "Tool calls by tool and result status", ["tool", "status"]
)
LLM_SECONDS = Histogram(
    "clawgate_llm_seconds",
    "Time the model took to answer, by provider (failed requests included)",
    ["provider"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
LLM_TOKENS = Counter(
    "clawgate_llm_tokens", "Tokens the model server reported using", ["provider", "kind"]
)
DECISION_SECONDS = Histogram(
    "clawgate_approval_decision_seconds",
    "Time from an approval request to its decision (approved or rejected)",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600),
)
MCP_CALLS = Counter(
    "clawgate_mcp_calls",
    "MCP tool calls sent (or not) to their server, by server, tool and outcome (completed, error, "
    "refused, invalid, timeout, lost, down, vanished, changed)",
    ["server", "tool", "outcome"],
)
MCP_UP = Gauge("clawgate_mcp_server_up", "1 while an MCP server is connected", ["server"])
MCP_RESTARTS = Counter(
    "clawgate_mcp_server_restarts", "Times an MCP server was started again", ["server"]
)
FEEDBACK = Counter(
    "clawgate_feedback",
    "👍 (good) and 👎 (bad) clicks on answers, by the model that wrote them",
    ["model", "value"],
)
