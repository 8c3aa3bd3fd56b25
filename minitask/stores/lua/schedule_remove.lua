-- schedule_remove: delete a schedule, its armed tick and what is known of its runs.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] fired (HASH)
-- KEYS[4] schedule_names (ZSET)   KEYS[5] schedules_removed (ZSET: name -> when removed)
-- ARGV[1] schedule name   ARGV[2] now (ms)   ARGV[3] the most names kept in KEYS[5]
-- ARGV[4] 1: mark the name removed even when this queue holds no record of it (the
--   remover's code decorates it here: its record may be lost); 0: only when it does
-- Returns: 1 when the schedule was there, else 0.
-- Data minitask did not write (lib.lua): a key of another type counts as empty.
-- The name is marked removed in KEYS[5], at ARGV[2], in a queue that held it (or
-- ARGV[4]): a worker whose code decorates it does not write it back while it runs
-- (schedule_save.lua's ARGV[5]); a save clears it. The marks are bounded: only the
-- newest ARGV[3] are kept (the oldest dropped here, by rank), so schedules added and
-- removed at run time, by any number of names, leave at most that many behind.
-- Invariant: once this returns, no worker fires the schedule again: a fire
-- finds no record and is refused. Runs already enqueued are left to finish.
local name = ARGV[1]
local armed = tolerant(0, 'ZREM', KEYS[2], name)
tolerant(0, 'ZREM', KEYS[4], name)
tolerant(0, 'HDEL', KEYS[3], 'at:' .. name, 'id:' .. name)
local held = tolerant(0, 'HDEL', KEYS[1], name)
if (held == 1 or armed == 1 or ARGV[4] == '1')
    and tolerant(false, 'ZADD', KEYS[5], ARGV[2], name) then
  tolerant(0, 'ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[3]) + 1))
end
return held
