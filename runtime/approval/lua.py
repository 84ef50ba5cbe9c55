"""The approval status machine, one Lua script per kind of transition (atomic, server time).

    pending -> approved | rejected | answered | expired
    approved -> executing -> consumed     (approved -> executing in the deciding script)
    executing -> outcome_unknown          (the executing process died)

Every script works on one session's keys only (one hash tag) and appends what it did to the
session's audit stream in the same atomic step.
"""

from __future__ import annotations

from runtime.store.history import WINDOW_LUA

# Shared prelude: server time in ms, and an audit append.
_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function audit(event, actor, status, extra, id)
  local entry = {'event', event, 'approval', id or ARGV[1], 'actor', actor, 'status', status,
                 'at', tostring(now)}
  for i = 1, #extra do entry[#entry + 1] = extra[i] end
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', 10000, '*', unpack(entry))
end
-- The decided call's result enters the history in the same step as the decision itself; when
-- it was the last call of its batch the session stops waiting too.
local function record_result(message, last)
  if message ~= '' then redis.call('RPUSH', KEYS[4], message) end
  if last == '1' and redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
end
-- KEYS[8..]: the approvals of a batch, its lead first. Once none is pending, the first
-- claimant (a job) carries out the whole batch: it becomes the run of the session (KEYS[6]),
-- so that delivered again it continues the resume. `force`: a withdrawal, which carries
-- nothing out, claims it even while items wait. Answers 'open' (items wait), 'claimed' (now),
-- 'again' (by this claimant before: it died carrying it out) or 'taken' (by another).
local function claim(claimant, force)
  if not force then
    for i = 8, #KEYS do
      if redis.call('HGET', KEYS[i], 'status') == 'pending' then return 'open' end
    end
  end
  local holder = redis.call('HGET', KEYS[8], 'resumer')
  if holder then return holder == claimant and 'again' or 'taken' end
  redis.call('HSET', KEYS[8], 'resumer', claimant)
  if not force then redis.call('HSET', KEYS[6], 'job', claimant, 'done', '0') end
  return 'claimed'
end
"""

# KEYS: approval (the lead's), pending, session audit, history, held, run, summary, then every
#       approval of the request, the lead first
# ARGV: lead id, conversation id, timeout ms, ttl ms, requester, count, then per approval its
#       id, record json, checkpoint json, call hash, tool, approvers needed; then the turn's
#       messages to append to history
# The checkpoints and the history they point into are written together; a batch's approvals
# share one expiry. The session waits for the lead.
CREATE = (
    _PRELUDE
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local expires = now + tonumber(ARGV[3])
local count = tonumber(ARGV[6])
for i = 1, count do
  local a, key = 6 + (i - 1) * 6, KEYS[7 + i]
  redis.call('HSET', key, 'record', ARGV[a + 2], 'checkpoint', ARGV[a + 3],
    'conversation_id', ARGV[2], 'call_hash', ARGV[a + 4], 'status', 'pending', 'created_at', now,
    'expires_at', expires, 'version', 1, 'quorum', ARGV[a + 6])
  redis.call('PEXPIRE', key, tonumber(ARGV[4]))
  audit('requested', ARGV[5], 'pending', {'tool', ARGV[a + 5]}, ARGV[a + 1])
end
-- The waiting mark outlives the approval's own timeout by two hours (time to execute): a
-- session can never stay stuck behind a mark that nothing will clear.
redis.call('SET', KEYS[2], ARGV[1], 'PX', tonumber(ARGV[3]) + 7200000)
for i = 7 + count * 6, #ARGV do redis.call('RPUSH', KEYS[4], ARGV[i]) end
return {'ok', tostring(now), tostring(expires)}
"""
)

# KEYS: approval, pending, session audit, history, held, run, summary; for an item of a batch
#       then the batch's approvals, its lead first
# ARGV: id, 'approved'|'rejected'|'answered', actor, reason, conversation id ('' = operator),
#       call hash, worker, the call's result message json when rejected or answered ('' =
#       none), '1' = last call of its batch, the deciding job ('' = none), a question's answer,
#       '1' = return the resumed run's window
# An approval goes straight on to `executing` (both transitions audited) under the deciding
# worker: there is no window in which it is approved but owned by nobody. A rejection records
# the call's result in history at once; so does an answer (the result holds it: the answer is
# never lost nor asked again after a crash). The deciding job is kept with the decision and
# becomes the session's run (see runtime/store/runs.py): delivered again, it is told {'retaken',
# status} and continues what it began. A decision answers with the history's length as it now
# stands and the session's context summary, and when asked with the resumed run's window (from
# where the summary ends: never the whole history; runtime/store/history.py WINDOW_LUA).
# An item of a batch stays `approved` (or `rejected`) without touching history: the resume
# carries the batch out in the model's order once the decision that leaves none pending
# claims it (`claim`, answered last).
DECIDE = (
    _PRELUDE
    + WINDOW_LUA
    + """
-- What a decision made answers: with ARGV[12] set, the window of history the resumed run goes
-- on with (from where the summary ends), as it stands right after the decision.
local function decided(version, claimed)
  local length = redis.call('LLEN', KEYS[4])
  local reply = {'ok', tostring(version + 1), '', redis.call('LLEN', KEYS[5]), length,
    redis.call('HGET', KEYS[7], 'record') or '', claimed}
  if ARGV[12] ~= '1' then return reply end
  return window(reply, KEYS[4], KEYS[7], length, length)
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'conversation_id', 'call_hash',
  'decided_by', 'version')
local version = tonumber(f[6])
if f[1] ~= 'pending' then
  if ARGV[10] ~= '' and redis.call('HGET', KEYS[1], 'job') == ARGV[10] then
    return {'retaken', f[1], f[5] or ''}
  end
  return {'already', f[1], f[5] or ''}
end
if now >= tonumber(f[2]) then
  redis.call('HSET', KEYS[1], 'status', 'expired', 'decided_at', now, 'version', version + 1)
  audit('expired', ARGV[3], 'expired', {})
  return {'expired'}
end
if ARGV[5] ~= '' and ARGV[5] ~= f[3] then
  audit('refused', ARGV[3], 'pending', {'why', 'wrong conversation'})
  return {'wrong_conversation'}
end
if ARGV[6] ~= f[4] then
  audit('refused', ARGV[3], 'pending', {'why', 'call hash mismatch'})
  return {'hash_mismatch'}
end
local decided_by = ARGV[3]
if ARGV[2] == 'approved' then
  -- The N-person rule: each distinct approver counts once; the call runs at the N-th.
  local needed = tonumber(redis.call('HGET', KEYS[1], 'quorum') or '1') or 1
  if needed > 1 then
    local approvers = {}
    for who in string.gmatch(redis.call('HGET', KEYS[1], 'approved_by') or '', '[^,]+') do
      if who == ARGV[3] then return {'counted', tostring(#approvers + 1), tostring(needed)} end
      approvers[#approvers + 1] = who
    end
    approvers[#approvers + 1] = ARGV[3]
    local list = table.concat(approvers, ',')
    if #approvers < needed then
      redis.call('HSET', KEYS[1], 'approved_by', list, 'version', version + 1)
      audit('counted', ARGV[3], 'pending', {'approvals', tostring(#approvers)})
      return {'partial', tostring(#approvers), tostring(needed)}
    end
    redis.call('HSET', KEYS[1], 'approved_by', list)
    decided_by = table.concat(approvers, ', ')
  end
end
if #KEYS > 7 then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'decided_by', decided_by, 'decided_at', now,
    'reason', ARGV[4], 'version', version + 1, 'job', ARGV[10])
  audit(ARGV[2], decided_by, ARGV[2], {'reason', ARGV[4]})
  local claimed = ARGV[10] ~= '' and claim(ARGV[10], false) or 'open'
  return decided(version, claimed)
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'decided_by', decided_by, 'decided_at', now,
  'reason', ARGV[4], 'version', version + 1, 'job', ARGV[10])
if ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'answer', ARGV[11]) end
audit(ARGV[2], decided_by, ARGV[2], {'reason', ARGV[4]})
if ARGV[10] ~= '' then redis.call('HSET', KEYS[6], 'job', ARGV[10], 'done', '0') end
if ARGV[2] == 'approved' then
  redis.call('HSET', KEYS[1], 'status', 'executing', 'worker', ARGV[7], 'executing_at', now,
    'version', version + 2)
  audit('executing', ARGV[7], 'executing', {})
else
  record_result(ARGV[8], ARGV[9])
end
return decided(version, '')
"""
)

# KEYS: approval, pending, session audit
# ARGV: id, from, to, actor, '1' = only when overdue, worker that must hold it ('' = any),
#       then field/value pairs to set
MOVE = (
    _PRELUDE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'worker', 'version', 'decided_by')
if f[1] ~= ARGV[2] then return {'wrong_status', f[1], f[5] or ''} end
if ARGV[5] == '1' and now < tonumber(f[2]) then return {'not_due'} end
if ARGV[6] ~= '' and f[3] ~= ARGV[6] then return {'wrong_worker'} end
local fields = {'status', ARGV[3], 'version', tonumber(f[4]) + 1, ARGV[3] .. '_at', now}
local extra = {}
for i = 7, #ARGV, 2 do
  fields[#fields + 1] = ARGV[i]; fields[#fields + 1] = ARGV[i + 1]
  extra[#extra + 1] = ARGV[i]; extra[#extra + 1] = ARGV[i + 1]
end
redis.call('HSET', KEYS[1], unpack(fields))
audit(ARGV[3], ARGV[4], ARGV[3], extra)
return {'ok', tostring(now)}
"""
)

# KEYS: approval, pending, session audit, history, held
# ARGV: id, outcome, result message json, '1' = last call of its batch
# Answers how many messages are held, so the caller knows whether to release any.
# executing -> consumed, with the call's result recorded in history in the same step: exactly
# one of this and recovery (MOVE to outcome_unknown) gets to answer the call.
CONSUME = (
    _PRELUDE
    + """
local f = redis.call('HMGET', KEYS[1], 'status', 'version', 'decided_by')
if f[1] ~= 'executing' then return {'wrong_status', f[1] or '', f[3] or ''} end
redis.call('HSET', KEYS[1], 'status', 'consumed', 'outcome', ARGV[2], 'consumed_at', now,
  'version', tonumber(f[2]) + 1)
audit('consumed', 'runtime', 'consumed', {'outcome', ARGV[2]})
record_result(ARGV[3], ARGV[4])
return {'ok', tostring(now), '', redis.call('LLEN', KEYS[5])}
"""
)

# KEYS: pending, held
# ARGV: approval id
# The session stops waiting for this approval (not for a newer one); answers how many messages
# are held.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return redis.call('LLEN', KEYS[2])
"""

# KEYS: pending, held, history
# ARGV: approval id, '1' = the session waits no more, then the tool messages that end the
#       suspended batch (or, '0', answer one call of it)
# Ends a batch whose approval was settled without running it (expired, withdrawn, outcome
# unknown): the messages are written only while the session still waits for this approval, so
# a late call can never put orphan results after newer turns. Answers how many are held.
CLOSE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  for i = 3, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
  if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end
end
return redis.call('LLEN', KEYS[2])
"""

# KEYS: as DECIDE's for a batch   ARGV: lead id, claimant, '1' = even while items are pending
# (a withdrawal). See `claim`.
CLAIM = (
    _PRELUDE
    + """
return claim(ARGV[2], ARGV[3] == '1')
"""
)

# KEYS: approval, pending, session audit
# ARGV: id, expected call hash, new call hash, record json, checkpoint json, quorum, actor, diff
EDIT = (
    _PRELUDE
    + """
local f = redis.call('HMGET', KEYS[1], 'status', 'call_hash', 'version', 'decided_by')
if not f[1] then return {'not_found'} end
if f[1] ~= 'pending' then return {'already', f[1], f[4] or ''} end
if f[2] ~= ARGV[2] then return {'hash_mismatch'} end
redis.call('HSET', KEYS[1], 'call_hash', ARGV[3], 'record', ARGV[4], 'checkpoint', ARGV[5],
  'quorum', ARGV[6], 'version', tonumber(f[3]) + 1)
redis.call('HDEL', KEYS[1], 'approved_by')
audit('edited', ARGV[7], 'pending', {'diff', ARGV[8]})
return {'ok'}
"""
)

# KEYS: approval   ARGV: flag name.  Sets the flag once, and only while the approval is pending.
FLAG = """
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
return redis.call('HSETNX', KEYS[1], ARGV[1], '1')
"""
