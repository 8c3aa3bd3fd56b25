-- schedule_armed: armed schedules of a queue (a record and a tick each), for a worker's
-- copy (worker/ticks.py); writes nothing but the removal of ticks naming no record
-- (overlong, below, or dangling: their record was deleted by hand, or never written).
-- Its cost is bounded whatever the queue holds:
-- the earliest ARGV[1] ticks, ARGV[1] more from ARGV[3] on (a scan a refresh at a time,
-- so that a schedule behind many earlier ticks is found in time), and the names asked
-- (ARGV[4...]: the schedules the worker knows); a record is fetched only for those.
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)
-- ARGV[1] batch   ARGV[2] longest record read (bytes)   ARGV[3] scan from (a rank)
-- ARGV[4...] names to read whatever their rank
-- Returns {schedules' error or '', ticks' error or '', the ticks read that name no
-- record: 'removed,kept' (kept: Redis refused their removal, a replica or a write
-- refused, so they are read again at the next look; then, after a space each, the
-- length of each tick removed as overlong, below),
-- next scan rank, name, record, tick, name, record, tick...}: the tick as Redis writes
-- the score; in place of a record longer than ARGV[2], its length (never read: one
-- planted record of 50 MB would be read at every refresh). A record with no tick is
-- never fired (its schedule has no more ticks) and is not looked at.
-- Data minitask did not write (lib.lua): a key of another type holds no armed schedule;
-- its error is the first or second element. A tick whose name is longer than any
-- schedule's (NAME_MOST: periodic.MAX_NAME_BYTES) is removed (ZREM) as it is read, before
-- any other call is made with it, and its length returned for the worker's log: a
-- planted 50 MB name cost Redis a second at every refresh for as long as it stayed.
-- Invariant: writes nothing else; a tick of a record is never removed.
local NAME_MOST = 175
local records = redis.pcall('HLEN', KEYS[1])
local held = redis.pcall('ZCARD', KEYS[2])
local found = {'', '', 0, 0}
if type(records) == 'table' then found[1] = records.err end
if type(held) == 'table' then found[2] = held.err end
if found[1] ~= '' or found[2] ~= '' then return found end
local dangling, kept = 0, 0
found[3] = ''
local batch = tonumber(ARGV[1])
local longest = tonumber(ARGV[2])
local seen = {}
local gone = 0  -- ticks removed: the ranks after them are that many lower
local function add(name, tick)
  if #name > NAME_MOST then
    redis.call('ZREM', KEYS[2], name)
    gone = gone + 1
    found[3] = found[3] .. ' ' .. #name
    return
  end
  if seen[name] then return end
  seen[name] = true
  local size = redis.call('HSTRLEN', KEYS[1], name)
  if size == 0 and redis.call('HEXISTS', KEYS[1], name) == 0 then
    -- a tick naming no record: nothing to fire, removed (a script runs alone, and
    -- schedule_save.lua writes a record and its tick in one: none is being saved)
    local reply = redis.pcall('ZREM', KEYS[2], name)
    if reply == 1 then
      gone = gone + 1
      dangling = dangling + 1
    elseif type(reply) == 'table' then
      kept = kept + 1  -- refused (its error): said as kept, never as removed
    end
    return
  end
  found[#found + 1] = name
  if size > longest then
    found[#found + 1] = size
  else
    found[#found + 1] = redis.call('HGET', KEYS[1], name)
  end
  found[#found + 1] = tick
end
local function range(first)
  local ticks = redis.call('ZRANGE', KEYS[2], first, first + batch - 1, 'WITHSCORES')
  for i = 1, #ticks, 2 do add(ticks[i], ticks[i + 1]) end
end
range(0)
local scan = math.max(tonumber(ARGV[3]), batch) - gone
held = held - gone
gone = 0
if scan < held then
  range(scan)
  if scan + batch - gone < held - gone then found[4] = scan + batch - gone end
end
for i = 4, #ARGV do
  local tick = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if tick then add(ARGV[i], tick) end
end
found[3] = dangling .. ',' .. kept .. found[3]
return found
