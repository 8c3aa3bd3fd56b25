-- bury: move a task to the dead letters, keeping its message for inspection.
-- KEYS[1] leases (ZSET)   KEYS[2] ready (ZSET)   KEYS[3] delayed (ZSET)
-- KEYS[4] messages (HASH)   KEYS[5] deliveries (HASH)   KEYS[6] retrying (HASH)
-- KEYS[7] dead (ZSET)   KEYS[8] dead_info (HASH)   KEYS[9] result (LIST)
-- ARGV[1] id   ARGV[2] now (ms)   ARGV[3] encoded outcome (why it died)
-- ARGV[4] result ttl (ms; 0: keep no result)
-- ARGV[5] message to keep when the stored one is missing or unreadable ('' keeps it)
-- Returns: 1 when the task was pending here and is now dead, 0 when it was not.
local id = ARGV[1]
local found = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
  + redis.call('ZREM', KEYS[3], id)
if found == 0 then return 0 end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[4], id, ARGV[5]) end
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
redis.call('ZADD', KEYS[7], ARGV[2], id)
redis.call('HSET', KEYS[8], id, ARGV[3])
redis.call('DEL', KEYS[9])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('RPUSH', KEYS[9], ARGV[3])
  redis.call('PEXPIRE', KEYS[9], ttl)
end
return 1
