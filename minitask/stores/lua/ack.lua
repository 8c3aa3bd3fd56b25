-- ack: record the final outcome of one or more tasks of a queue and remove
-- every trace of them from the queue.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] order (HASH)
-- KEYS[6 + i] result (LIST) of the i-th task
-- ARGV: per task three: id, encoded outcome, result ttl (ms; 0: keep no result)
-- Returns: per task, 1 when the caller still held the lease, 0 when it had lost
-- it (the task was re-delivered meanwhile; the outcome is recorded all the
-- same, and a ready-list entry left behind is skipped by fetch, its message
-- being gone).
-- Invariant: a message leaves Redis in the same step that records its outcome.
local held, ids = {}, {}
for i = 1, #ARGV, 3 do
  local id, result = ARGV[i], KEYS[6 + (i + 2) / 3]
  ids[#ids + 1] = id
  held[#held + 1] = redis.call('ZREM', KEYS[1], id)
  redis.call('DEL', result)
  local ttl = tonumber(ARGV[i + 2])
  if ttl > 0 then
    redis.call('RPUSH', result, ARGV[i + 1])
    redis.call('PEXPIRE', result, ttl)
  end
end
-- one call per key for the whole batch (batches are capped at MAX_PREFETCH ids)
if redis.call('ZREM', KEYS[2], unpack(ids)) > 0 then
  redis.call('HDEL', KEYS[6], unpack(ids))  -- delayed ids keep their sequence in order
end
redis.call('HDEL', KEYS[3], unpack(ids))
redis.call('HDEL', KEYS[4], unpack(ids))
redis.call('HDEL', KEYS[5], unpack(ids))
return held
