"""clawgate's channel-agnostic agent runtime. Its public face, what adapters and the
composition root use:

- `runtime.agent`: `Runtime` (run, suspend, resume, decide, cancel, pending, sweep) and
  `RuntimeConfig`;
- `runtime.channel`: the events the runtime emits and the `Channel` port adapters implement;
- `runtime.models`: the boundary types (actors, conversations, messages, results);
- `runtime.queue`: `Inbound`, `Ingest`, `Inbox` and `Worker`, the durable path of an input;
- `runtime.middleware.default`: `default_chain`, the one order of the tool middleware.

Everything else is inside: `docs/architecture.md` draws the floors.
"""
