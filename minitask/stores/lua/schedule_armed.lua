-- schedule_armed: the armed schedules of a queue (a record and a tick each), for a
-- worker's copy (worker/ticks.py); writes nothing.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)
-- Returns {schedules' error or '', ticks' error or '', ticks held, name, record, tick,
-- name, record, tick...}: each name that has both a record and a tick (the tick as
-- Redis writes the score). A record with no tick is never fired (its schedule has no
-- more ticks), and a tick with no record names nothing to fire (data minitask did not
-- write): neither is sent. The two are joined from the smaller: a queue whose schedules
-- hold 100,000 records nobody armed, or whose ticks hold 300,000 that name no record,
-- costs a read of what the other holds, not of those (the caller counts the ticks
-- that name no record: ticks held less the names sent).
-- Data minitask did not write (lib.lua): a key of another type holds no armed schedule;
-- its error is the first or second element.
local records = redis.pcall('HLEN', KEYS[1])
local held = redis.pcall('ZCARD', KEYS[2])
local found = {'', '', 0}
if type(records) == 'table' then found[1] = records.err end
if type(held) == 'table' then found[2] = held.err end
if found[1] ~= '' or found[2] ~= '' then return found end
found[3] = held
-- names asked at once by one HMGET (Lua's unpack fails past about 8,000 values)
local CHUNK = 1000
if held <= records then
  local ticks = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  for first = 1, #ticks, 2 * CHUNK do
    local names = {}
    for i = first, math.min(first + 2 * CHUNK - 1, #ticks), 2 do names[#names + 1] = ticks[i] end
    local bodies = redis.call('HMGET', KEYS[1], unpack(names))
    for j, name in ipairs(names) do
      if bodies[j] then
        found[#found + 1] = name
        found[#found + 1] = bodies[j]
        found[#found + 1] = ticks[first + 2 * j - 1]
      end
    end
  end
else
  local fields = redis.call('HGETALL', KEYS[1])
  for i = 1, #fields, 2 do
    local tick = redis.call('ZSCORE', KEYS[2], fields[i])
    if tick then
      found[#found + 1] = fields[i]
      found[#found + 1] = fields[i + 1]
      found[#found + 1] = tick
    end
  end
end
return found
