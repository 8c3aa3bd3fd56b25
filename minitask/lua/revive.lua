-- revive: put a dead task back at the tail of its queue for a fresh start.
-- KEYS[1] dead (ZSET)   KEYS[2] dead_info (HASH)   KEYS[3] messages (HASH)
-- KEYS[4] ready (ZSET)  KEYS[5] seq (STRING)       KEYS[6] wake (LIST)
-- KEYS[7] result (LIST)
-- ARGV[1] id   ARGV[2] encoded message for the new first attempt   ARGV[3] priority
-- Returns: 1 when revived, 0 when the id is not among the dead letters.
local band, middle = 562949953421312, 281474976710656
local id = ARGV[1]
if redis.call('ZREM', KEYS[1], id) == 0 then return 0 end
redis.call('HDEL', KEYS[2], id)
redis.call('HSET', KEYS[3], id, ARGV[2])
redis.call('DEL', KEYS[7])
local seq = redis.call('INCR', KEYS[5])
redis.call('ZADD', KEYS[4], string.format('%.0f', (9 - tonumber(ARGV[3])) * band + middle + seq), id)
redis.call('RPUSH', KEYS[6], '1')
return 1
