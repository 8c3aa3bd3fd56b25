-- cancel: withdraw a task that has not started; it will never run.
-- KEYS[1] ready (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] retrying (HASH)   KEYS[5] result (LIST)
-- ARGV[1] id   ARGV[2] encoded outcome (cancelled)   ARGV[3] result ttl (ms)
-- Returns: 1 when cancelled, 0 when the task is running, finished or unknown.
local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id) == 0 then return 0 end
redis.call('HDEL', KEYS[3], id)
redis.call('HDEL', KEYS[4], id)
redis.call('DEL', KEYS[5])
redis.call('RPUSH', KEYS[5], ARGV[2])
redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[3]))
return 1
