-- release: give back tasks this worker leased but will not run (graceful stop),
-- at the head of their priority band, without counting the delivery.
-- KEYS[1] leases (ZSET)   KEYS[2] ready (ZSET)   KEYS[3] deliveries (HASH)
-- KEYS[4] seq (STRING)    KEYS[5] wake (LIST)
-- ARGV: pairs of id, priority
-- Returns: how many were given back (a lease already lost is skipped).
local band, middle = 562949953421312, 281474976710656
local released = 0
for i = 1, #ARGV, 2 do
  local id, priority = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('ZREM', KEYS[1], id) == 1 then
    if redis.call('HINCRBY', KEYS[3], id, -1) <= 0 then redis.call('HDEL', KEYS[3], id) end
    local seq = redis.call('INCR', KEYS[4])
    redis.call('ZADD', KEYS[2], string.format('%.0f', (9 - priority) * band + middle - seq), id)
    redis.call('RPUSH', KEYS[5], '1')
    released = released + 1
  end
end
return released
