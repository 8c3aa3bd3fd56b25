-- cancel_unsent: cancel a workflow step its workflow has not sent yet (a chain's later
-- step, a chord's body): its marker says cancelled, so that spawn.lua never sends it
-- (the worker whose spawn skips it then cancels what follows it: stores/unsent.py),
-- and it gets a cancelled outcome, as a withdrawn queued step does. A step sent
-- already is left as it is, for cancel.lua (withdrawn if still queued).
-- KEYS[1] marker (HASH: state; keys.py once:<id>)   KEYS[2] result (LIST)
-- KEYS[3] messages (HASH)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] ttl of both (ms)
-- ARGV[4] '1': the step is promised (a handle made with its workflow, or a handle
--   record, names it): cancelled with no marker yet; '0': only over the marker its
--   workflow reserved for it (an explicit task_id: field w, no state)
-- Returns: 1 when cancelled; 0 when its marker holds a state (sent, or cancelled
--   already), its id holds a task or an outcome, its marker is no hash (not
--   minitask's), or it has no marker and ARGV[4] is '0'.
-- Invariant: this and spawn.lua each run whole, on the one slot of the step's queue:
-- a step is either sent (its marker says sent first: this answers 0, and cancel.lua
-- withdraws it as a queued task) or never sent; never sent and reported cancelled.
local marker, id = KEYS[1], ARGV[1]
local kind = redis.call('TYPE', marker)['ok']
if kind == 'none' then
  if ARGV[4] ~= '1' then return 0 end
elseif kind ~= 'hash' or redis.call('HEXISTS', marker, 'state') == 1 then
  return 0
end
-- a task of the same id (spawn.lua marks its step sent then), or an outcome: not unsent
if tolerant(1, 'HEXISTS', KEYS[3], id) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
-- every write below, the take-back's DEL too, asked before the first (a refused DEL
-- had left the outcome of a step to be sent, its status cancelled while it ran):
-- Redis 7.0 and later are asked (lib.lua's writable); 6.2 cannot be, and the take-back's
-- DEL and the PEXPIREs are tried on the result, which does not exist (nothing changes;
-- its ACL names commands, for every key alike)
if redis.acl_check_cmd then
  local writable = guards().writable
  writable('RPUSH', KEYS[2], ARGV[2])
  writable('HSET', marker, 'state', 'cancelled')
  writable('PEXPIRE', marker, ARGV[3])
  writable('PEXPIRE', KEYS[2], ARGV[3])
  writable('DEL', KEYS[2])
else
  redis.call('DEL', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
-- the outcome first, then the marker: a marker HSET refused (an ACL changed while a
-- producer runs; Redis keeps the writes before a refused command) takes the outcome
-- back, so that a refusal leaves the step as it was, to be sent, never a marker
-- without an outcome (its get() would wait for ever) nor an outcome of a step sent
redis.call('RPUSH', KEYS[2], ARGV[2])
local marked = redis.pcall('HSET', marker, 'state', 'cancelled')
if type(marked) == 'table' and marked.err then
  redis.call('DEL', KEYS[2])
  return redis.error_reply(marked.err)
end
redis.call('PEXPIRE', marker, ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
