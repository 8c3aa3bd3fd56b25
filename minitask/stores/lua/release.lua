-- release: give back tasks this worker leased but will not run (graceful stop),
-- at the head of their priority, without counting the delivery.
-- KEYS[1] leases (ZSET)   KEYS[2] deliveries (HASH)   KEYS[3] wake (LIST)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- ARGV: pairs of id, priority
-- Returns: how many were given back (a lease already lost is skipped).
local released = 0
for i = #ARGV - 1, 1, -2 do
  -- walking backwards keeps the given order once every id is pushed to the head
  local id, priority = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('ZREM', KEYS[1], id) == 1 then
    if redis.call('HINCRBY', KEYS[2], id, -1) <= 0 then redis.call('HDEL', KEYS[2], id) end
    redis.call('LPUSH', KEYS[13 - priority], id)
    released = released + 1
  end
end
if released > 0 then redis.call('RPUSH', KEYS[3], '1') end
return released
