-- fetch: promote due delayed tasks (promote.lua, prepended by stores/scripts.py),
-- re-deliver expired leases, then lease the best ready tasks, in one atomic step
-- any number of workers may run at once.
-- KEYS[1] delayed (ZSET)     KEYS[2] leases (ZSET)     KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)  KEYS[5] wake (LIST)       KEYS[6] dead (ZSET)
-- KEYS[7..16] ready lists, priority 9 first (KEYS[16 - p] holds priority p)
-- KEYS[17] cancelled (ZSET)   KEYS[18] order (HASH)
-- ARGV[1] now (ms), or 'server': the server's clock, for a fetch sent ahead of
--   the moment it runs (behind a BLPOP)
-- ARGV[2] lease length (ms)   ARGV[3] how many to lease
-- ARGV[4] max deliveries
-- ARGV[5] batch limit for promotion, reclaim and stale entries dropped
-- Returns: {leased, poisoned, next_event_ms}
--   leased: flat list id, message, delivery number, priority, ... per leased task
--   poisoned: ids whose lease expired max-deliveries times; they stay leased
--     (expired) until the caller dead-letters them, so nothing is lost if it dies
--   next_event_ms: earliest delayed due time or lease deadline, or -1
-- Invariant: a live task is in exactly one of: a ready list, delayed, leases, dead.
local now = tonumber(ARGV[1])
if ARGV[1] == 'server' then
  local clock = redis.call('TIME')
  now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
local deadline = now + tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local max_deliveries = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local horizon = string.format('%.0f', now * 10 + 9)
promote_due(KEYS[1], KEYS[18], 7, now, limit)

local poisoned = {}
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #expired, 2 do
  local id = expired[i]
  local delivered = tonumber(redis.call('HGET', KEYS[4], id) or '0')
  if delivered >= max_deliveries then
    poisoned[#poisoned + 1] = id
  else
    -- its worker died or stalled: back to the head of its priority
    local priority = 9 - tonumber(expired[i + 1]) % 10
    redis.call('ZREM', KEYS[2], id)
    redis.call('LPUSH', KEYS[16 - priority], id)
  end
end

local leased = {}
local band = 7
local dropped = 0
while #leased < want * 4 and band <= 16 and dropped < limit do
  local id = redis.call('LPOP', KEYS[band])
  if not id then
    band = band + 1
  else
    local body = not (redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[1], id)
                      or redis.call('ZSCORE', KEYS[6], id)) and redis.call('HGET', KEYS[3], id)
    if not body then
      -- a stale entry (cancelled, or held elsewhere already) is dropped here; once
      -- it is gone, a cancelled id no longer needs leaving out of the counts
      redis.call('ZREM', KEYS[17], id)
      dropped = dropped + 1
    else
      local priority = 16 - band
      local delivered = redis.call('HINCRBY', KEYS[4], id, 1)
      redis.call('ZADD', KEYS[2], string.format('%.0f', deadline * 10 + 9 - priority), id)
      leased[#leased + 1] = id
      leased[#leased + 1] = body
      leased[#leased + 1] = delivered
      leased[#leased + 1] = priority
    end
  end
end
if band > 16 then
  -- every ready list is empty: stale wake tokens would only cost empty fetches
  redis.call('DEL', KEYS[5])
end

local next_event = -1
if dropped >= limit and #leased == 0 then
  -- a long run of stale entries (a mass cancel) is cleared a batch per call, so no
  -- call blocks Redis for long; the caller fetches again at once
  return {leased, poisoned, now}
end
local first_due = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first_due[2] then next_event = math.floor(tonumber(first_due[2]) / 10) end
local first_lease = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first_lease[2] then
  local lease_end = math.floor(tonumber(first_lease[2]) / 10)
  if next_event < 0 or lease_end < next_event then next_event = lease_end end
end
return {leased, poisoned, next_event}
