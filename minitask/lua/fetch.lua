-- fetch: promote due delayed tasks, re-deliver expired leases, then lease the
-- best ready tasks, all in one atomic step any number of workers may run at once.
-- KEYS[1] ready (ZSET)       KEYS[2] delayed (ZSET)     KEYS[3] leases (ZSET)
-- KEYS[4] messages (HASH)    KEYS[5] deliveries (HASH)  KEYS[6] seq (STRING)
-- KEYS[7] wake (LIST)
-- ARGV[1] now (ms)   ARGV[2] lease deadline (ms)   ARGV[3] how many to lease
-- ARGV[4] max deliveries   ARGV[5] batch limit for promotion and reclaim
-- Returns: {leased, poisoned, next_event_ms}
--   leased: flat list id, message, delivery number, priority, ... per leased task
--   poisoned: ids whose lease expired max-deliveries times; they stay leased
--     (expired) until the caller dead-letters them, so nothing is lost if it dies
--   next_event_ms: earliest delayed due time or lease deadline, or -1
-- Invariant: a task is in exactly one of ready, delayed, leases (or dead).
local band, middle = 562949953421312, 281474976710656
local now = tonumber(ARGV[1])
local deadline = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local max_deliveries = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local horizon = string.format('%.0f', now * 10 + 9)

local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #due, 2 do
  local priority = 9 - tonumber(due[i + 1]) % 10
  local seq = redis.call('INCR', KEYS[6])
  redis.call('ZREM', KEYS[2], due[i])
  redis.call('ZADD', KEYS[1], string.format('%.0f', (9 - priority) * band + middle + seq), due[i])
end

local poisoned = {}
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', horizon, 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #expired, 2 do
  local id = expired[i]
  local delivered = tonumber(redis.call('HGET', KEYS[5], id) or '0')
  if delivered >= max_deliveries then
    poisoned[#poisoned + 1] = id
  else
    -- the worker died or stalled: back to the head of its priority band
    local priority = 9 - tonumber(expired[i + 1]) % 10
    local seq = redis.call('INCR', KEYS[6])
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZADD', KEYS[1], string.format('%.0f', (9 - priority) * band + middle - seq), id)
  end
end

local leased = {}
if want > 0 then
  local ready = redis.call('ZRANGE', KEYS[1], 0, want - 1, 'WITHSCORES')
  for i = 1, #ready, 2 do
    local id = ready[i]
    local priority = 9 - math.floor(tonumber(ready[i + 1]) / band)
    redis.call('ZREM', KEYS[1], id)
    local body = redis.call('HGET', KEYS[4], id)
    if body then
      local delivered = redis.call('HINCRBY', KEYS[5], id, 1)
      redis.call('ZADD', KEYS[3], string.format('%.0f', deadline * 10 + 9 - priority), id)
      leased[#leased + 1] = id
      leased[#leased + 1] = body
      leased[#leased + 1] = delivered
      leased[#leased + 1] = priority
    end
  end
end

if redis.call('ZCARD', KEYS[1]) == 0 then
  -- nothing left to wake anyone for; stale tokens would only cost empty fetches
  redis.call('DEL', KEYS[7])
end

local next_event = -1
local first_due = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first_due[2] then next_event = math.floor(tonumber(first_due[2]) / 10) end
local first_lease = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if first_lease[2] then
  local lease_end = math.floor(tonumber(first_lease[2]) / 10)
  if next_event < 0 or lease_end < next_event then next_event = lease_end end
end
return {leased, poisoned, next_event}
