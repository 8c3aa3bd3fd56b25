-- schedule_save: write a schedule and arm its first tick, unless it is unchanged.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] wake (LIST)
-- KEYS[4] schedule_names (ZSET, score 0: the names the listings page, never the records)
-- KEYS[5] schedules_removed (ZSET: the names remove_schedule removed, schedule_remove.lua)
-- ARGV[1] schedule name   ARGV[2] record (periodic.Schedule.record)
-- ARGV[3] first tick (ms), or -1 when the schedule has none
-- ARGV[4] wake tokens to push, so that idle workers read the schedules again
-- ARGV[5] 1: a running worker writing back a decorated schedule Redis lost (its
--   record, or its tick): nothing is done (returns {0, '', ''}) when the name is marked
--   removed, or a record is there that is another or has a tick armed; else it is
--   written and armed (returns 1); 0: a save, which clears that mark
-- Returns: {1 when written, 0 when the same record was there already (its armed
-- tick is kept: rewriting an unchanged schedule, as every worker does on start,
-- moves nothing; one with no tick armed is armed at ARGV[3]), where schedules was
-- moved aside to or '', where ticks was or ''}.
-- Data minitask did not write (lib.lua): schedules or ticks of another type holds
-- none of minitask's schedules (it stopped every schedule of the queue): it is moved
-- aside whole first (lib.lua's aside(): to `key`:foreign, kept for its owner, one
-- WARNING in Redis's log), then the record is written and its tick armed (an
-- unchanged record's tick too, when it has none armed): nothing is written
-- before the moves, and the moves are whole. A wake list of another type gets no
-- token, a schedule_names of another type no name (the next listing moves it aside
-- and names the records again: schedule_page.lua).
-- The record there is measured (HSTRLEN) before it is compared: a planted 50 MB one is
-- replaced without being copied.
-- Invariant: a schedule is in schedules and its name in schedule_names; it is in
-- ticks, at its next tick, while it has one.
local name = ARGV[1]
local back = ARGV[5] == '1'
if back and tolerant(false, 'ZSCORE', KEYS[5], name) then
  return {0, '', ''}
end
-- a write-back over a record there: only this very record with no tick armed (its
-- ticks lost, not its record: a ticks key deleted or evicted), which is armed again
if back and tolerant(0, 'HEXISTS', KEYS[1], name) == 1
    and (redis.call('HSTRLEN', KEYS[1], name) ~= #ARGV[2]
         or redis.call('HGET', KEYS[1], name) ~= ARGV[2]
         or tolerant(false, 'ZSCORE', KEYS[2], name)) then
  return {0, '', ''}
end
tolerant(0, 'ZREM', KEYS[5], name)
local moved = {'', ''}
for i, kind in ipairs({'hash', 'zset'}) do
  if not guards().fits(KEYS[i], kind) then
    moved[i] = guards().aside(KEYS[i], guards().held_other(kind))
  end
end
local same = redis.call('HSTRLEN', KEYS[1], name) == #ARGV[2]
  and redis.call('HGET', KEYS[1], name) == ARGV[2]
tolerant(0, 'ZADD', KEYS[4], 0, name)  -- (an older minitask's record: named here now)
if same and (tonumber(ARGV[3]) < 0 or redis.call('ZSCORE', KEYS[2], name)) then
  return {0, unpack(moved)}
end
redis.call('HSET', KEYS[1], name, ARGV[2])
if tonumber(ARGV[3]) >= 0 then
  redis.call('ZADD', KEYS[2], ARGV[3], name)
else
  redis.call('ZREM', KEYS[2], name)
end
local count = tonumber(ARGV[4])
if count > 0 then
  local tokens = {}
  for i = 1, count do tokens[i] = '1' end
  if tolerant(0, 'RPUSH', KEYS[3], unpack(tokens)) > count then
    redis.call('LTRIM', KEYS[3], 0, count - 1)
  end
end
return {(same and not back) and 0 or 1, unpack(moved)}
