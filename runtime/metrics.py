"""Prometheus metrics the runtime keeps, served at /metrics by `clawgate serve` and by a worker
on CLAWGATE_METRICS_PORT. The dashboard (deploy/grafana) and the alerts (deploy/prometheus)
read them: tests/unit/test_ops_bundle.py checks that every name they use is defined."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RUNS = Counter("clawgate_runs", "Agent runs by the reason they stopped", ["stop_reason"])
APPROVALS = Counter(
    "clawgate_approvals",
    "Approval requests and what became of them: requested, approved, rejected, answered, refused "
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
# The inbox as a scrape finds it (runtime/queue/gauges.py): one Redis for every process, so
# each process reports the same values (aggregate with max, not sum).
QUEUE_DEPTH = Gauge("clawgate_queue_depth", "Inputs in the inbox by state", ["state"])
QUEUE_OLDEST = Gauge(
    "clawgate_queue_oldest_waiting_seconds",
    "How long the oldest input no worker has read yet has waited (0: none waits)",
)
WORKERS_POLLING = Gauge(
    "clawgate_workers_polling",
    "Workers that said they poll the inbox in the last 10 seconds",
)
REDIS_UP = Gauge("clawgate_redis_up", "1 when the last scrape could read the inbox from Redis")
TAKEOVERS = Counter(
    "clawgate_worker_takeovers",
    "Jobs a worker took from another: stopped (it said it stopped), lapsed (its liveness mark "
    "lapsed: killed or stalled), idle (pending past CLAWGATE_RECLAIM_IDLE, the fallback)",
    ["how"],
)
JOBS_DROPPED = Counter(
    "clawgate_jobs_dropped", "Jobs given up because every worker that started them stopped"
)
RETAKEN_CALLS = Counter(
    "clawgate_retaken_calls",
    "Calls a run taken over after a crash found without a result: run_again (it cannot have "
    "had an effect) or outcome_unknown (it may have: not run again)",
    ["result"],
)
SANDBOX_CONTAINED = Gauge(
    "clawgate_sandbox_contained",
    "1 when bash commands run in a working bwrap sandbox, 0 when not (mode auto: every call "
    "asks; off: the opt-out), by CLAWGATE_SANDBOX",
    ["mode"],
)
SANDBOX_FAILURES = Counter(
    "clawgate_sandbox_failures",
    "Bash commands the sandbox could not run: setup (bwrap failed before the command "
    "started), scan_too_large (too many files in the work dir to mask every secret)",
    ["reason"],
)


def _start_at_zero(counter: Counter, *values: str) -> None:
    """Expose each child at 0 from the start: `increase()` cannot see the first event of a
    series that only appears with it, and the alerts (deploy/prometheus) count single events."""
    for value in values:
        counter.labels(value)


_start_at_zero(
    APPROVALS,
    "requested",
    "approved",
    "rejected",
    "answered",
    "refused",
    "expired",
    "cancelled",
    "outcome_unknown",
)
_start_at_zero(TAKEOVERS, "stopped", "lapsed", "idle")
_start_at_zero(RETAKEN_CALLS, "run_again", "outcome_unknown")
_start_at_zero(SANDBOX_FAILURES, "setup", "scan_too_large")
