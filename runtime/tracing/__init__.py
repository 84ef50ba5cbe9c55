"""Tracing of runs: each run is recorded as a JSON tree of spans
(`agent.run` → `agent.step` → `llm.call` | `tool.call` → `approval.pause`, and `approval.resume`
for a run continued after a decision, linked to the trace it resumes), stored in Redis with a TTL.

- runtime/trace_context.py (the ground floor, also read by the audit trail and the logs):
  the current span (a ContextVar) and `current_trace_id()`;
- recorder.py: `Tracer` (mode, store), `Trace`, `Span`;
- hooks.py: the one-line hooks the loop, the executor and the runtime call;
- document.py: the stored document (pydantic); store.py: `TraceStore` (Redis).
"""
