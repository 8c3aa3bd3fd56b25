-- schedule_remove: delete a schedule, its armed tick and what is known of its runs.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] fired (HASH)
-- ARGV[1] schedule name
-- Returns: 1 when the schedule was there, else 0.
-- Invariant: once this returns, no worker fires the schedule again: a fire
-- finds no record and is refused. Runs already enqueued are left to finish.
local name = ARGV[1]
redis.call('ZREM', KEYS[2], name)
redis.call('HDEL', KEYS[3], 'at:' .. name, 'id:' .. name)
return redis.call('HDEL', KEYS[1], name)
