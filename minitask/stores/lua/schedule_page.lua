-- schedule_page: one page of a queue's schedules, for the listings; writes nothing but
-- the removals of entries no minitask wrote and of ticks whose record is gone (below).
-- KEYS[1] schedules (HASH)   KEYS[2] ticks (ZSET)   KEYS[3] fired (HASH)
-- KEYS[4] schedule_names (ZSET, score 0: written with each record, schedule_save.lua)
-- ARGV[1] 'armed' or 'unarmed'   ARGV[2] entries at most (a page)
-- armed: the schedules that have a tick, soonest first (the order of ticks: tick,
--   then name byte by byte), after the entry ARGV[3] (its tick, as a score) and
--   ARGV[4] (its name: one longer than NAME_MOST stands for every name it begins, a
--   tick name no minitask wrote); ARGV[3] '' from the first. Kept by position, not offset: a
--   schedule that fires moves to a later tick, so no entry not yet listed can move
--   before the position and be missed. Finding the position is two ZCOUNT and, among
--   entries of the same tick, a binary search by rank: O(log^2 N) whatever the page.
-- unarmed: the schedules with no tick, by name from schedule_names: ARGV[3] '0' from
--   the first, 'n' after the name ARGV[4] (one longer than NAME_MOST: after every name
--   it begins); ZRANGE BYLEX of ARGV[2] names until ARGV[2] entries are found, the
--   names end, or UNARMED_BUDGET names were read (the armed ones are passed over, by
--   ZSCORE: no page in between is empty). Only names are paged: each record is
--   measured (HSTRLEN) and one longer than ARGV[5] never copied (an HSCAN of the
--   records copied a planted 50 MB one inside Redis at every listing, 0.3 s each).
--   Every page makes sure the names hold one score (one_score()); the first that
--   every record is named (named(): ZCARD against HLEN): a hash an older minitask
--   wrote (or one running beside, mid-upgrade) is named once, a bounded work per call;
--   a name whose record is gone is removed as it is met. A schedule_names of another
--   type is moved aside (a_zset()) and the names made again. When it cannot be moved,
--   or Redis refuses the names (a replica), or a hash too large to name in one call is
--   not named yet, the records are scanned as before: ARGV[3] an HSCAN
--   cursor, HSCANs of COUNT ARGV[2], each page naming what it read where Redis takes
--   it; ARGV[4] then the name the listed ones come after ('' from the first).
-- ARGV[5] the most bytes of a record sent (longer: its length is sent instead)
-- Returns {'ok', next, removed, name, tick or false, record or false, last tick or
-- false, ...}: next is the HSCAN cursor that follows (unarmed; '0': no more), or
-- (armed) {'1' more or '0' none, the last tick read's score, its name, ticks read
-- that name no record, of them those Redis refused to remove}: the next page starts
-- after the last one read, removed or not (its name cut to NAME_MOST + 1 bytes then:
-- the place of all it begins). A tick naming no record is never sent: it is removed
-- (below) and counted, and the call reads on, ARMED_BUDGET ticks at most.
-- {'foreign', the error} when schedules holds another type than a hash.
-- Data minitask did not write (lib.lua): ticks or fired of another type count as
-- empty (every schedule is then unarmed, or never fired). What no minitask writes
-- costs one listing, not every one (a planted 50 MB field name was sent to each):
-- removed lists each entry taken out, as {'name', length} (a field of schedules
-- longer than NAME_MOST: HDEL, with its record) or {'tick', length} (a member of
-- ticks as long: ZREM). A removal Redis refuses (a replica) leaves the entry where it
-- is, still never sent. None is ever sent: only its length. A record longer than
-- ARGV[5] is never taken out (an app allowing longer messages writes one, and its
-- workers fire it): it is sent as its length, left in place, never copied (but by
-- the scan of the records, when schedule_names cannot be used, above).
-- Returns, for the unarmed pages by name, next as {'n', the last name read (cut to
-- NAME_MOST + 1 bytes)} or '0' (no more); removed may then hold {'index', length}:
-- a member of schedule_names longer than NAME_MOST (ZREM), {'score', how many}: the
-- names of another score than 0 (ZREMRANGEBYSCORE), {'order', 0}: a name that did
-- not come after the one before (the listing then ends: next '0'), or {'aside', key}:
-- schedule_names held another type, and was moved (RENAME) to that key.
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

-- Whether `a` comes after the place `b` (a name; one longer than NAME_MOST stands for
-- every name it begins: past them all).
local function past(a, b)
  if #b > NAME_MOST and string.sub(a, 1, #b) == b then return false end
  return after(a, b)
end

-- a record longer than minitask writes (ARGV[5]) is sent as its length, a last
-- tick longer than a number as none: a planted 20 MB record was sent to every listing.
-- Each is measured (HSTRLEN), then those short enough read in one HMGET (done()).
local most = tonumber(ARGV[5])

-- Whether Redis made the write (a replica, or a full one, refuses it).
local function done_by(command, key, ...)
  local reply = redis.pcall(command, key, ...)
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

-- The most ticks (armed) or names (unarmed) a call reads: a page of ticks naming no
-- record is passed over (and removed) a budget at a time, never read as the end.
local ARMED_BUDGET = 5000

-- The first rank of ticks after the entry at score `score` named `name` (above).
local function rank_after(score, name)
  local low = tolerant(0, 'ZCOUNT', KEYS[2], '-inf', '(' .. score)
  local high = tolerant(0, 'ZCOUNT', KEYS[2], '-inf', score)
  while low < high do
    local middle = math.floor((low + high) / 2)
    local member = redis.call('ZRANGE', KEYS[2], middle, middle)[1]
    if past(member, name) then high = middle else low = middle + 1 end
  end
  return low
end

if ARGV[1] == 'armed' then
  local start = 0
  if ARGV[3] ~= '' then start = rank_after(ARGV[3], ARGV[4]) end
  -- Ticks are read `count` at a time until `count` schedules are found, the ticks end,
  -- or ARMED_BUDGET were read. A tick whose name is longer than any schedule's
  -- (NAME_MOST) or names no record (dangling: its record was deleted by hand, or it
  -- was planted) is passed over and removed (as schedule_armed.lua does): 1,700 of
  -- them before a schedule's tick hid it from every listing for good. Safe: a
  -- script runs alone, and schedule_save.lua writes a record and its tick in one
  -- script (schedule_fire.lua arms only a tick whose record it read, schedule_remove
  -- deletes both), so a tick seen here with no record has none being written.
  -- A removal Redis refuses (a replica) is passed over all the same, counted.
  local read, listed, dangling, kept = 0, 0, 0, 0
  local more, last_score, last_name = '0', '', ''
  repeat
    local ticks = tolerant({}, 'ZRANGE', KEYS[2], start, start + count - 1, 'WITHSCORES')
    local gone = 0
    for i = 1, #ticks, 2 do
      local name = ticks[i]
      read, last_score, last_name = read + 1, ticks[i + 1], string.sub(name, 1, NAME_MOST + 1)
      if #name > NAME_MOST then  -- no schedule's name: no record either
        if done_by('ZREM', KEYS[2], name) then
          removed[#removed + 1] = {'tick', #name}
          gone = gone + 1
        else
          kept = kept + 1
        end
        dangling = dangling + 1
      elseif tolerant(0, 'HEXISTS', KEYS[1], name) == 0 then
        if done_by('ZREM', KEYS[2], name) then gone = gone + 1 else kept = kept + 1 end
        dangling = dangling + 1
      else
        add(name, ticks[i + 1], false)
        listed = listed + 1
        if listed >= count then
          -- more after this one: the next page starts after it
          more = (i + 1 < #ticks or tolerant(0, 'ZCARD', KEYS[2]) > start + (i + 1) / 2 - gone)
            and '1' or '0'
          break
        end
      end
    end
    start = start + #ticks / 2 - gone
    if listed < count then
      if #ticks / 2 < count then more = '0'
      elseif read >= ARMED_BUDGET then more = '1' end
    end
  until listed >= count or #ticks / 2 < count or read >= ARMED_BUDGET
  found[2] = {more, last_score, last_name, dangling, kept}
  -- their records, measured: one longer than ARGV[5] is sent as its length, unread
  measured(KEYS[1], function(name) return name end, 2, most,
           function(length) return length end)
  return done()
end

local UNARMED_BUDGET = ARMED_BUDGET

-- The least ZRANGE BYLEX start past every name that begins with `prefix` (nil: none).
local function beyond(prefix)
  local i = #prefix
  while i > 0 and string.byte(prefix, i) == 255 do i = i - 1 end
  if i == 0 then return nil end
  return '[' .. string.sub(prefix, 1, i - 1) .. string.char(string.byte(prefix, i) + 1)
end

-- Whether Redis takes the writes of names here: a write that changes nothing (ZADD XX
-- adds no name, GT -inf raises no score, not even of a '' someone planted), refused as
-- every ZADD is where Redis
-- refuses them (a replica, an ACL without ZADD, a full Redis): there the records are
-- scanned at once, with no copy of every name first (a planted 50 MB field name was
-- copied by HKEYS at every listing).
local writable = nil
local function can_write()
  if writable == nil then writable = done_by('ZADD', KEYS[4], 'XX', 'GT', '-inf', '') end
  return writable
end

-- Name `names` in schedule_names (score 0), a ZADD of at most 500 names at a time;
-- false when Redis refuses (or the key is of another type).
local function name_all(names)
  local args = {}
  for i, name in ipairs(names) do
    args[#args + 1] = 0
    args[#args + 1] = name
    if #args >= 1000 or i == #names then
      if not done_by('ZADD', KEYS[4], unpack(args)) then return false end
      args = {}
    end
  end
  return true
end

-- Whether schedule_names is a sorted set (or missing) now: one of another type is
-- moved aside whole (lib.lua's guards().aside: to schedule_names:foreign, kept for its
-- owner), said once ({'aside', the key it was moved to}), and the names made again
-- from the records by named() (a string planted there had every listing scan the
-- records for ever, copying a 50 MB one at each). False when the move is refused (a
-- replica, an ACL without RENAME) or the key cannot be read: the records are scanned.
local function a_zset(reply)
  if not (type(reply) == 'table' and reply.err) then return true end
  if not string.find(tostring(reply.err), 'WRONGTYPE', 1, true) then return false end
  local moved, to = pcall(guards().aside, KEYS[4], guards().held_other('zset'))
  if not moved then return false end
  removed[#removed + 1] = {'aside', to}
  return true
end

-- Whether the names all hold score 0, as minitask writes them: ZRANGE BYLEX is defined
-- only then (one name of score 5 planted made the pages of 50 end after 50, one of -1
-- repeat the same 50 for ever). Checked at every page (ZCOUNT against ZCARD); names of
-- another score, no minitask's, are removed, said once ({'score', how many}); false
-- when they cannot be (another type not moved aside, or Redis refuses): the records
-- are then scanned.
local function one_score()
  local kept = redis.pcall('ZCARD', KEYS[4])
  if not a_zset(kept) then return false end
  if type(kept) == 'table' then kept = 0 end  -- moved aside: missing now
  if redis.call('ZCOUNT', KEYS[4], 0, 0) == kept then return true end
  if not can_write() then return false end
  local below = redis.pcall('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(0')
  local above = redis.pcall('ZREMRANGEBYSCORE', KEYS[4], '(0', '+inf')
  if type(below) == 'table' or type(above) == 'table' then return false end
  removed[#removed + 1] = {'score', below + above}
  return true
end

-- Whether every record is named in schedule_names (ZCARD against HLEN), or is now;
-- false when they cannot be (another type, a write Redis refuses, or more records than
-- UNARMED_BUDGET to name): the records are then scanned, and named a page at a time.
-- Bounded per call: a hash of at most UNARMED_BUDGET records (an older minitask's, or
-- one record planted unnamed) is named here from HKEYS (names, never records); a larger
-- one is named by the pages of the scan, each naming what it read (an HKEYS of 300,000
-- names and a ZADD each took 8.5 s in one call, past lua-time-limit, and again after
-- each record planted unnamed). The price: until one listing has walked every page,
-- the listings of such a hash scan the records, copying each (a planted 50 MB one
-- too), as they did before the names were kept; once named, never again.
local function named()
  if not one_score() then return false end
  if redis.call('ZCARD', KEYS[4]) >= size then return true end
  if size > UNARMED_BUDGET or not can_write() then return false end
  local names = {}
  for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
    if #name > NAME_MOST then  -- no schedule's name: removed with its record, unsent
      if done_by('HDEL', KEYS[1], name) then removed[#removed + 1] = {'name', #name} end
    else
      names[#names + 1] = name
    end
  end
  return name_all(names)
end

-- One page of the unarmed schedules, by name (above).
local function by_name()
  local from = '-'
  if ARGV[3] == 'n' then
    from = '(' .. ARGV[4]
    if #ARGV[4] > NAME_MOST then from = beyond(ARGV[4]) end
    if from == nil then found[2] = '0'; return done() end
  end
  local read, last, names, stuck = 0, nil, {}, false
  repeat
    names = tolerant({}, 'ZRANGE', KEYS[4], from, '+', 'BYLEX', 'LIMIT', 0, count)
    for _, name in ipairs(names) do
      -- each name comes after the one before (the first after the place): one that
      -- does not (the names out of order, one_score() notwithstanding) ends the
      -- listing here, said, rather than list the same names for ever
      if (last and not after(name, last)) or
         (not last and ARGV[3] == 'n' and not past(name, ARGV[4])) then
        stuck = true
        break
      end
      read, last = read + 1, name
      if #name > NAME_MOST then  -- no name minitask keeps: removed, unsent
        if done_by('ZREM', KEYS[4], name) then removed[#removed + 1] = {'index', #name} end
      elseif tolerant(0, 'HEXISTS', KEYS[1], name) == 0 then
        done_by('ZREM', KEYS[4], name)  -- its record is gone: so is the name
      elseif not tolerant(false, 'ZSCORE', KEYS[2], name) then
        add(name, false, false)
        if #found - 3 >= 4 * count then break end
      end
    end
    if last then from = '(' .. last end
  until stuck or #names < count or #found - 3 >= 4 * count or read >= UNARMED_BUDGET
  if stuck then
    removed[#removed + 1] = {'order', 0}
    found[2] = '0'
  elseif #names < count and #found - 3 < 4 * count then
    found[2] = '0'
  else
    found[2] = {'n', string.sub(last, 1, NAME_MOST + 1)}
  end
  -- their records, measured: one longer than ARGV[5] is sent as its length, unread
  measured(KEYS[1], function(name) return name end, 2, most,
           function(length) return length end)
  return done()
end

-- the HSCAN cursor, and the name every record listed must come after ('' none: from a
-- page by name whose names could no longer be used, those before it were listed)
local cursor, mark = ARGV[3], ARGV[4]
if ARGV[3] == 'n' then
  if one_score() then return by_name() end
  cursor = '0'
elseif ARGV[3] == '0' and named() then
  return by_name()
end
local naming = can_write()

-- HSCAN on, past the armed records, until the page has `count` entries, the scan is
-- back to 0, or UNARMED_BUDGET fields were read: a page that is empty once the armed
-- ones are listed is (but past that budget a call) the end.
local read = 0
repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', count)
  cursor = page[1]
  local fields, names = page[2], {}
  read = read + #fields / 2
  for i = 1, #fields, 2 do
    local name, record = fields[i], fields[i + 1]
    if #name > NAME_MOST then  -- no schedule's name: removed with its record, unsent
      if done_by('HDEL', KEYS[1], name) then removed[#removed + 1] = {'name', #name} end
    else
      names[#names + 1] = name
      if (mark == '' or past(name, mark)) and not tolerant(false, 'ZSCORE', KEYS[2], name) then
        add(name, false, record)  -- a record longer than ARGV[5]: its length
      end
    end
  end
  -- named as read: once a listing has walked every page, the next pages the names
  if naming and #names > 0 then naming = name_all(names) end
until cursor == '0' or #found - 3 >= 4 * count or read >= UNARMED_BUDGET
found[2] = cursor
return done()
