-- cancel: withdraw a task that has not started; it will never run.
-- KEYS[1] delayed (ZSET)   KEYS[2] leases (ZSET)   KEYS[3] dead (ZSET)
-- KEYS[4] messages (HASH)  KEYS[5] retrying (HASH)   KEYS[6] result (LIST)
-- KEYS[7] deliveries (HASH)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] result ttl (ms)
-- Returns: 1 when cancelled, 0 when the task is running, finished, dead or unknown.
-- A cancelled ready task keeps its ready-list entry; without its message,
-- fetch drops it. That keeps cancel O(1) however long the queue.
local id = ARGV[1]
local scheduled = redis.call('ZREM', KEYS[1], id) == 1
if not scheduled then
  if redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[3], id) then return 0 end
  if redis.call('HEXISTS', KEYS[4], id) == 0 then return 0 end
end
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[7], id)
redis.call('DEL', KEYS[6])
redis.call('RPUSH', KEYS[6], ARGV[2])
redis.call('PEXPIRE', KEYS[6], tonumber(ARGV[3]))
return 1
