-- bury: move a task to the dead letters, keeping its message for inspection.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] dead (ZSET)
-- KEYS[7] dead_info (HASH)   KEYS[8] result (LIST)   KEYS[9] order (HASH)
-- ARGV[1] id   ARGV[2] now (ms)   ARGV[3] encoded outcome (why it died)
-- ARGV[4] result ttl (ms; 0: keep no result)
-- Returns: 1 when the task was leased or delayed here and is now dead, 0 when
-- it was not (someone else holds it now and decides its fate).
local id = ARGV[1]
local delayed = redis.call('ZREM', KEYS[2], id)
if redis.call('ZREM', KEYS[1], id) + delayed == 0 then return 0 end
if delayed == 1 then redis.call('HDEL', KEYS[9], id) end
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('ZADD', KEYS[6], ARGV[2], id)
redis.call('HSET', KEYS[7], id, ARGV[3])
redis.call('DEL', KEYS[8])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('RPUSH', KEYS[8], ARGV[3])
  redis.call('PEXPIRE', KEYS[8], ttl)
end
return 1
