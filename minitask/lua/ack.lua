-- ack: record a task's final outcome and remove every trace of it from the queue.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] order (HASH)
-- KEYS[7] result (LIST)
-- ARGV[1] id   ARGV[2] encoded outcome   ARGV[3] result ttl (ms; 0: keep no result)
-- Returns: 1 when the caller still held the lease, 0 when it had lost it (the
-- task was re-delivered meanwhile; the outcome is recorded all the same, and a
-- ready-list entry left behind is skipped by fetch, its message being gone).
-- Invariant: the message leaves Redis in the same step that records its outcome.
local id = ARGV[1]
local held = redis.call('ZREM', KEYS[1], id)
if redis.call('ZREM', KEYS[2], id) == 1 then redis.call('HDEL', KEYS[6], id) end
redis.call('HDEL', KEYS[3], id)
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('DEL', KEYS[7])
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('RPUSH', KEYS[7], ARGV[2])
  redis.call('PEXPIRE', KEYS[7], ttl)
end
return held
