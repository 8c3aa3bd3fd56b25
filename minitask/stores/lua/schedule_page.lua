-- schedule_page: one page of a queue's schedules, for the listings; writes nothing but
-- the removals of entries no minitask wrote (below).
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] fired (HASH)
-- ARGV[1] 'armed' or 'unarmed'   ARGV[2] entries at most (a page)
-- armed: the schedules that have a tick, soonest first (the order of ticks: tick,
--   then name byte by byte), after the entry ARGV[3] (its tick, as a score) and
--   ARGV[4] (its name: one longer than NAME_MOST stands for every name it begins, a
--   tick name no minitask wrote); ARGV[3] '' from the first. Kept by position, not offset: a
--   schedule that fires moves to a later tick, so no entry not yet listed can move
--   before the position and be missed. Finding the position is two ZCOUNT and, among
--   entries of the same tick, a binary search by rank: O(log^2 N) whatever the page.
-- unarmed: the schedules with no tick, in hash order: ARGV[3] an HSCAN cursor
--   ('0' from the first); HSCANs of COUNT ARGV[2] until ARGV[2] entries are found,
--   the scan is back to 0, or UNARMED_BUDGET fields were read (the armed records are
--   read and passed over: no page in between is empty), and one ZSCORE for each field.
-- ARGV[5] the most bytes of a record sent (longer: its length is sent instead)
-- Returns {'ok', next, removed, name, tick or false, record or false, last tick or
-- false, ...}: next is the HSCAN cursor that follows (unarmed; '0': no more), or
-- (armed) {ticks read, the last one's score, its name}: fewer than ARGV[2] read, no
-- more; removed ones count, and the next page starts after the last one read, removed
-- or not (its name cut to NAME_MOST + 1 bytes then: the place of all it begins). A
-- tick of ticks without a record (a name minitask did not write) comes with record
-- false. {'foreign', the error} when schedules holds another type than a hash.
-- Data minitask did not write (lib.lua): ticks or fired of another type count as
-- empty (every schedule is then unarmed, or never fired). What no minitask writes
-- costs one listing, not every one (a planted 50 MB field name was sent to each):
-- removed lists each entry taken out, as {'name', length} (a field of schedules
-- longer than NAME_MOST: HDEL, with its record) or {'tick', length} (a member of
-- ticks as long: ZREM). A removal Redis refuses (a replica) leaves the entry where it
-- is, still never sent. None is ever sent: only its length. A record longer than
-- ARGV[5] is never taken out (an app allowing longer messages writes one, and its
-- workers fire it): it is sent as its length, left in place; the HSCAN of the
-- unarmed records copies it inside Redis at each such page (a known cost).
local size = redis.pcall('HLEN', KEYS[1])
if type(size) == 'table' and size.err then
  guards().foreign(size)
  return {'foreign', size.err}
end
local count = tonumber(ARGV[2])
local removed = {}
local found = {'ok', '', removed}
-- The longest schedule name minitask writes (periodic.MAX_NAME_BYTES, as in
-- schedule_armed.lua): a field or tick name longer is none.
local NAME_MOST = 175

-- Whether member `a` comes after `b` in a sorted set of equal scores (memcmp: Lua's
-- own < follows the server's locale).
local function after(a, b)
  local shorter = math.min(#a, #b)
  for i = 1, shorter do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- a record longer than minitask writes (ARGV[5]) is sent as its length, a last
-- tick longer than a number as none: a planted 20 MB record was sent to every listing.
-- Each is measured (HSTRLEN), then those short enough read in one HMGET (done()).
local most = tonumber(ARGV[5])

-- Whether Redis made the removal (a replica, or a full one, refuses it).
local function done_by(command, key, member)
  local reply = redis.pcall(command, key, member)
  return not (type(reply) == 'table' and reply.err)
end

local function add(name, tick, record)
  if type(record) == 'string' and #record > most then record = #record end
  found[#found + 1] = name
  found[#found + 1] = tick
  found[#found + 1] = record
  found[#found + 1] = false
end

-- Read, into the entries from `first` on (their place + `offset`), the values of
-- `key` at each entry's field (`field_of` its name) of at most `longest` bytes; a
-- longer one is `long`(its length). A key of another type reads as none.
local function measured(key, field_of, offset, longest, long)
  local places, fields = {}, {}
  for i = 4, #found, 4 do
    local field = field_of(found[i])
    local length = tolerant(-1, 'HSTRLEN', key, field)
    if length < 0 then return end
    if length > longest then
      found[i + offset] = long(length)
    else
      places[#places + 1], fields[#fields + 1] = i + offset, field
    end
  end
  if #fields == 0 then return end
  for n, value in ipairs(redis.call('HMGET', key, unpack(fields))) do found[places[n]] = value end
end

-- the page, each entry with its last tick (at most 64 bytes: a number)
local function done()
  measured(KEYS[3], function(name) return 'at:' .. name end, 3, 64,
           function() return false end)
  return found
end

if ARGV[1] == 'armed' then
  local start = 0
  local past = after
  if #ARGV[4] > NAME_MOST then  -- past the removed tick's name and all it begins
    past = function(a, b) return after(a, b) and string.sub(a, 1, #b) ~= b end
  end
  if ARGV[3] ~= '' then
    local low = tolerant(0, 'ZCOUNT', KEYS[2], '-inf', '(' .. ARGV[3])
    local high = tolerant(0, 'ZCOUNT', KEYS[2], '-inf', ARGV[3])
    while low < high do
      local middle = math.floor((low + high) / 2)
      local member = redis.call('ZRANGE', KEYS[2], middle, middle)[1]
      if past(member, ARGV[4]) then high = middle else low = middle + 1 end
    end
    start = low
  end
  local ticks = tolerant({}, 'ZRANGE', KEYS[2], start, start + count - 1, 'WITHSCORES')
  if #ticks > 0 then
    found[2] = {tostring(#ticks / 2), ticks[#ticks], string.sub(ticks[#ticks - 1], 1, NAME_MOST + 1)}
  else
    found[2] = {'0', '', ''}
  end
  -- a tick whose name is longer than any schedule's (NAME_MOST: no minitask wrote it)
  -- is removed, never sent nor used to read a record (as schedule_armed.lua does)
  for i = 1, #ticks, 2 do
    if #ticks[i] <= NAME_MOST then
      add(ticks[i], ticks[i + 1], false)
    elseif done_by('ZREM', KEYS[2], ticks[i]) then
      removed[#removed + 1] = {'tick', #ticks[i]}
    end
  end
  -- their records, measured: one longer than ARGV[5] is sent as its length, unread
  measured(KEYS[1], function(name) return name end, 2, most,
           function(length) return length end)
  return done()
end

-- HSCAN on, past the armed records, until the page has `count` entries, the scan is
-- back to 0, or UNARMED_BUDGET fields were read: a page that is empty once the armed
-- ones are listed is (but past that budget a call) the end.
local UNARMED_BUDGET = 5000
local cursor, read = ARGV[3], 0
repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', count)
  cursor = page[1]
  local fields = page[2]
  read = read + #fields / 2
  for i = 1, #fields, 2 do
    local name, record = fields[i], fields[i + 1]
    if #name > NAME_MOST then  -- no schedule's name: removed with its record, unsent
      if done_by('HDEL', KEYS[1], name) then removed[#removed + 1] = {'name', #name} end
    elseif not tolerant(false, 'ZSCORE', KEYS[2], name) then
      add(name, false, record)  -- a record longer than ARGV[5]: its length
    end
  end
until cursor == '0' or #found - 3 >= 4 * count or read >= UNARMED_BUDGET
found[2] = cursor
return done()
