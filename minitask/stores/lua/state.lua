-- state: where a task is now, read in one consistent step.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] retrying (HASH)
-- KEYS[4] dead (ZSET)     KEYS[5] messages (HASH)  KEYS[6] result (LIST)
-- ARGV[1] id
-- Returns: {state, encoded outcome or false}; state is one of running,
-- scheduled, retrying, dead, queued, finished, unknown.
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[1], id) then return {'running', false} end
if redis.call('ZSCORE', KEYS[2], id) then
  local note = redis.call('HGET', KEYS[3], id)
  if note then return {'retrying', note} end
  return {'scheduled', false}
end
if redis.call('ZSCORE', KEYS[4], id) then return {'dead', false} end
-- pending, not delayed, not leased, not dead: it sits in a ready list
if redis.call('HEXISTS', KEYS[5], id) == 1 then return {'queued', false} end
local outcome = redis.call('LINDEX', KEYS[6], 0)
if outcome then return {'finished', outcome} end
return {'unknown', false}
