"""Who owns a job, and whether its process is alive: the one place for liveness, renewal,
fencing, takeover and the lease.

- The liveness mark (liveness_mark.py, `keys.worker(name)`): each worker marks itself
  "alive" in Redis for `CLAWGATE_LIVENESS_TTL` before it reads a job, "gone" when it stops.
- Renewal (renewal.py): a worker renews its mark every eighth of the TTL, and with it its
  lease. It also renews its claims on the jobs it holds (`Inbox.renew_claims`), so the idle
  reclaim (the fallback for consumers that never had a mark) does not take them.
- Lapse, fence, takeover (takeover.py): a mark not renewed lapses; once it stayed lapsed for a
  moment (or said "gone"), another worker fences it (marks it "fenced", which its owner can
  never renew: renewing and fencing are scripts that exclude each other) and takes its jobs
  over (`Inbox.take_over`). A mark renewed before the fence keeps its jobs: it only stalled.
- The lease (lease.py): every effect of a job (a post, a tool run, a history write) first
  calls `guard()`. A process that stalled past the TTL (SIGSTOP, a paused VM) wakes with its
  lease lapsed and acts on nothing until renewal decides: renewed and no job lost, it goes
  on; fenced (or a job taken), its jobs stop where they stand and the process exits.

The queue uses it in runtime/queue/worker.py (`Worker.start`, its lanes hold the lease) and
runtime/queue/inbox.py (the mark's and the jobs' Redis side); an approved call being executed
renews the same mark (runtime/approval/execute.py), so a crash is told from a slow tool.
"""

from redis.exceptions import RedisClusterException, RedisError

# Redis failing, as runtime.store.connection.REDIS_FAILURES (the store uses this package, so
# this package does not use the store).
FAILED: tuple[type[Exception], ...] = (RedisError, RedisClusterException)
