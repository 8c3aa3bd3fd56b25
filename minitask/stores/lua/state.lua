-- state: where a task is now, read in one consistent step.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] retrying (HASH)
-- KEYS[4] dead (ZSET)     KEYS[5] messages (HASH)  KEYS[6] result (LIST)
-- ARGV[1] id
-- Returns: {state, encoded outcome or false}; state is one of running,
-- scheduled, retrying, dead, queued, finished, unknown.
-- Data minitask did not write (lib.lua): a key of another type counts as empty.
local id = ARGV[1]
if tolerant(false, 'ZSCORE', KEYS[1], id) then return {'running', false} end
if tolerant(false, 'ZSCORE', KEYS[2], id) then
  local note = tolerant(false, 'HGET', KEYS[3], id)
  if note then return {'retrying', note} end
  return {'scheduled', false}
end
if tolerant(false, 'ZSCORE', KEYS[4], id) then return {'dead', false} end
-- pending, not delayed, not leased, not dead: it sits in a ready list
if tolerant(0, 'HEXISTS', KEYS[5], id) == 1 then return {'queued', false} end
local outcome = tolerant(false, 'LINDEX', KEYS[6], 0)
if outcome then return {'finished', outcome} end
return {'unknown', false}
