-- purge_ready: delete a batch of a queue's ready tasks for good (minitask purge).
-- KEYS[1] leases (ZSET)   KEYS[2] delayed (ZSET)   KEYS[3] dead (ZSET)
-- KEYS[4] messages (HASH)   KEYS[5] deliveries (HASH)   KEYS[6] retrying (HASH)
-- KEYS[7] cancelled (ZSET)   KEYS[8] order (HASH)
-- KEYS[9..18] ready lists, priority 9 first
-- ARGV[1] most ready-list entries to take in this call
-- Returns: {tasks deleted, entries taken}; the caller calls again while the
-- second equals ARGV[1], so that no call blocks Redis for long.
-- Only ready tasks go: an entry whose task is leased, delayed or dead is a stale
-- entry (fetch would drop it too) and its task is left alone.
local limit = tonumber(ARGV[1])
local deleted, taken = 0, 0
local band = 9
while taken < limit and band <= 18 do
  local id = redis.call('LPOP', KEYS[band])
  if not id then
    band = band + 1
  else
    taken = taken + 1
    redis.call('ZREM', KEYS[7], id)
    if not (redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
            or redis.call('ZSCORE', KEYS[3], id)) then
      deleted = deleted + redis.call('HDEL', KEYS[4], id)
      redis.call('HDEL', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
      redis.call('HDEL', KEYS[8], id)
    end
  end
end
return {deleted, taken}
