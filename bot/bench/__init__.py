"""`clawgate bench`: `runtime` (the runtime and approvals, runtime.py) and `ingest` (a real
`clawgate serve` under signed platform traffic: ingest.py, with the fake platforms of
platforms.py)."""
