-- release: give back tasks this worker leased but will not run (graceful stop),
-- at the head of their priority, without counting the delivery.
-- KEYS[1] leases (ZSET)   KEYS[2] deliveries (HASH)   KEYS[3] wake (LIST)
-- KEYS[4..13] ready lists, priority 9 first (KEYS[13 - p] holds priority p)
-- KEYS[14] flow (HASH)   KEYS[15] flow_due (ZSET)   KEYS[16] the flow prefix (flow.lua)
-- ARGV: triples of id, priority, delivery: '' or the delivery number the caller's
--   lease got (a process pool's supervisor giving back what a dead child had
--   prefetched): that task is given back only while its delivery count is still
--   that number, so a lease that expired meanwhile and was taken again (counted
--   again) is left to its new holder
-- Returns: how many were given back (a lease already lost is skipped).
-- Data minitask did not write (lib.lua): every key the call writes (leases,
-- deliveries, wake, the ready lists tasks go back to, the flow keys) that holds
-- another type is moved aside to `key`:foreign first (lib.lua's aside()), so the tasks
-- always go back: leases of another type count as empty then (nothing held). A
-- delivery count that is no number is dropped.
guards().settle(KEYS[1], 'zset')
guards().settle(KEYS[2], 'hash')
guards().settle(KEYS[3], 'list')
for i = 2, #ARGV, 3 do guards().settle(KEYS[13 - tonumber(ARGV[i])], 'list') end
local released, ids = 0, {}
for i = #ARGV - 2, 1, -3 do
  -- walking backwards keeps the given order once every id is pushed to the head
  local id, priority, delivery = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  -- the lease removed last: a refusal part way (an ACL changed while the worker
  -- runs) leaves it, and the task comes back when it expires, never lost
  if redis.call('ZSCORE', KEYS[1], id)
     and (delivery == '' or redis.call('HGET', KEYS[2], id) == delivery) then
    if guards().bump(KEYS[2], id, -1) <= 0 then redis.call('HDEL', KEYS[2], id) end
    redis.call('LPUSH', KEYS[13 - priority], id)
    redis.call('ZREM', KEYS[1], id)
    released = released + 1
    ids[released] = id
  end
end
if released > 0 then
  redis.call('RPUSH', KEYS[3], '1')
  -- slots freed, specs kept
  flow_control().finish(KEYS[14], KEYS[16], KEYS[15], KEYS[3], ids, false)
end
return released
