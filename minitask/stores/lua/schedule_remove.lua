-- schedule_remove: delete a schedule, its armed tick and what is known of its runs.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] fired (HASH)
-- KEYS[4] schedule_names (ZSET)
-- ARGV[1] schedule name
-- Returns: 1 when the schedule was there, else 0.
-- Data minitask did not write (lib.lua): a key of another type counts as empty.
-- Invariant: once this returns, no worker fires the schedule again: a fire
-- finds no record and is refused. Runs already enqueued are left to finish.
local name = ARGV[1]
tolerant(0, 'ZREM', KEYS[2], name)
tolerant(0, 'ZREM', KEYS[4], name)
tolerant(0, 'HDEL', KEYS[3], 'at:' .. name, 'id:' .. name)
return tolerant(0, 'HDEL', KEYS[1], name)
