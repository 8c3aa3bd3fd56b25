-- state: where a task is now, read in one consistent step.
-- KEYS[1] leases (ZSET)   KEYS[2] ready (ZSET)   KEYS[3] delayed (ZSET)
-- KEYS[4] retrying (HASH) KEYS[5] dead (ZSET)    KEYS[6] result (LIST)
-- ARGV[1] id
-- Returns: {state, encoded outcome or false}; state is one of running, queued,
-- scheduled, retrying, dead, finished, unknown.
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[1], id) then return {'running', false} end
if redis.call('ZSCORE', KEYS[2], id) then return {'queued', false} end
if redis.call('ZSCORE', KEYS[3], id) then
  local note = redis.call('HGET', KEYS[4], id)
  if note then return {'retrying', note} end
  return {'scheduled', false}
end
if redis.call('ZSCORE', KEYS[5], id) then return {'dead', false} end
local outcome = redis.call('LINDEX', KEYS[6], 0)
if outcome then return {'finished', outcome} end
return {'unknown', false}
