-- retry: end a failed attempt and schedule the next one.
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] messages (HASH)
-- KEYS[4] deliveries (HASH)   KEYS[5] retrying (HASH)   KEYS[6] wake (LIST)
-- KEYS[7] order (HASH)   KEYS[8] sequence (STRING)
-- ARGV[1] id   ARGV[2] encoded message for the next attempt
-- ARGV[3] due (ms)   ARGV[4] priority   ARGV[5] encoded outcome of the failed attempt
-- Returns: 1, or 0 when the caller had lost the lease (nothing is changed then:
-- whoever holds the task now decides its fate).
local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) == 0 then return 0 end
redis.call('HSET', KEYS[3], id, ARGV[2])
redis.call('HDEL', KEYS[4], id)
redis.call('HSET', KEYS[5], id, ARGV[5])
local score = string.format('%.0f', tonumber(ARGV[3]) * 10 + 9 - tonumber(ARGV[4]))
redis.call('ZADD', KEYS[2], score, id)
redis.call('HSET', KEYS[7], id, redis.call('INCR', KEYS[8]))
if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == id then
  redis.call('RPUSH', KEYS[6], '1')
end
return 1
