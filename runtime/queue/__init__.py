"""The queue wing: every input from a platform becomes an `Inbound` (inbound.py), is deduped
and queued durably in its session's lane (ingest.py, inbox.py: a Redis Stream plus per-session
lanes), and is taken by a worker (worker.py) of any process, one session's inputs in order."""
