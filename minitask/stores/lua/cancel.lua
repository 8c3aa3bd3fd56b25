-- cancel: withdraw a task that has not started; it will never run.
-- KEYS[1] delayed (ZSET)   KEYS[2] leases (ZSET)   KEYS[3] dead (ZSET)
-- KEYS[4] messages (HASH)  KEYS[5] retrying (HASH)   KEYS[6] result (LIST)
-- KEYS[7] deliveries (HASH)   KEYS[8] order (HASH)   KEYS[9] cancelled (ZSET)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] result ttl (ms)
-- ARGV[4] the task's priority (read from its message by the caller)
-- Returns: 1 when cancelled, 0 when the task is running, finished, dead or unknown.
-- A cancelled ready task keeps its ready-list entry; without its message,
-- fetch drops it. That keeps cancel O(1) however long the queue; the id waits in
-- cancelled, at its priority, until then, so that counts can leave it out.
local id = ARGV[1]
local scheduled = redis.call('ZREM', KEYS[1], id) == 1
if scheduled then
  redis.call('HDEL', KEYS[8], id)
else
  if redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[3], id) then return 0 end
  if redis.call('HEXISTS', KEYS[4], id) == 0 then return 0 end
  redis.call('ZADD', KEYS[9], ARGV[4], id)
end
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[7], id)
redis.call('DEL', KEYS[6])
redis.call('RPUSH', KEYS[6], ARGV[2])
redis.call('PEXPIRE', KEYS[6], tonumber(ARGV[3]))
return 1
