-- broadcast_lib: what the broadcast scripts share (stores/broadcast.py puts it
-- after lib.lua, in front of each broadcast_*.lua).
-- Every broadcast script takes the same first nine keys of a queue:
-- KEYS[1] bcast:state (HASH: seq, the last call sequence handed out; dropped, the
--   last sequence dropped unpulled; maxlen, ttl: the last send's limits; prune_ttl:
--   the longest broadcast_ttl any send gave, which prunes go by; scan: where indexing
--   cursors written by an older minitask goes on; indexed: a scan came back to 0)
-- KEYS[2] bcast:log (ZSET id -> seq)
-- KEYS[3] bcast:bodies (HASH)  KEYS[4] bcast:sent (HASH id -> ms)
-- KEYS[5] bcast:cursors (HASH subscriber -> seq: each subscriber's cursor, the truth)
-- KEYS[6] bcast:seen (HASH subscriber -> ms: what an older minitask renews too)
-- KEYS[7] bcast:places (ZSET subscriber -> its cursor: the least is ZRANGE 0 0)
-- KEYS[8] bcast:since (ZSET subscriber -> the seq it subscribed after: join()'s who)
-- KEYS[9] bcast:alive (ZSET subscriber -> ms last seen, the server's clock: the
--   stale are pruned first)
-- A script that wakes lanes (send, pull) takes their wake lists after its own keys
-- and the subscribers they are of in ARGV (wake_from): no key is built here.
-- No script reads every subscriber: a pull or a send costs O(log n) in them, and
-- each prunes at most PRUNE_BATCH subscribers and indexes at most INDEX_BATCH.
-- Data minitask did not write (lib.lua): a log, bodies or sent of another type
-- counts as empty where read; a count, limit or time that is no whole number in its
-- range (nan, inf, 1.5; a maxlen or ttl below 1) is read as missing (a call with no
-- send time is past the ttl), a cursor as 0 when dropping pulled calls (none is lost); a
-- place that is not its subscriber's cursor (inf, -inf, 1e300, 1.5, -5) is set back
-- to it before calls are deleted (least_cursor, check_places), but a cursor above a
-- place that is a sequence (set_cursor writes both: no pull wrote it) is set back to
-- the place, never the place raised (set_back_ahead; the pull checks its own); an alive that is
-- no time is aged from the server's now (prune, age_ahead). A value of state or
-- cursors longer than any minitask writes is read whole once, then deleted (state)
-- or set to 0 (a cursor: state_of, cursor_of).

-- Subscribers pruned per script at most, and cursors of an older layout indexed.
local PRUNE_BATCH, INDEX_BATCH = 16, 200
-- Index entries (places) a script checks against the cursors at most, per read.
local PLACE_BATCH = 16
-- Past broadcast_ttl, a subscriber not seen for this long more is pruned (ms):
-- a live worker says it is alive at least every heartbeat.
local PRUNE_GRACE = 60000
-- The shortest broadcast_ttl a prune goes by (ms): an app given a tiny ttl by
-- mistake does not prune the workers of the others.
local PRUNE_FLOOR = 600000
-- Lanes a pull or a send wakes at most: wake-ups spread as a tree over the
-- subscribers, the newest subscribed first (a send wakes the first WAKE_FANOUT, a
-- subscriber that pulled calls wakes its WAKE_FANOUT children). Newest first: the
-- subscribers gone for good (old pod names, until pruned) are the oldest, at the
-- leaves, where they hold up nobody; one whose parent is down pulls at its next
-- wait's end anyway (at most 5 s). A parent busy or gone (its wake list held tokens
-- already: no worker of it waits there) does not hold its children up: the script
-- that wakes it wakes them too, for the first BUSY_RELAYS such parents.
local WAKE_FANOUT = 16
local BUSY_RELAYS = 4

-- The server's clock (ms), read once a script: a prune ages subscribers by it,
-- not by a caller's clock that may run hours ahead.
local server_now
local function server_ms()
  if not server_now then
    local clock = redis.call('TIME')
    server_now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  end
  return server_now
end

-- The longest value minitask writes in a field of state or cursors: a whole number
-- below 2^53 (16 digits), an HSCAN cursor (20 digits at most).
local FIELD_MOST = 32

-- Field `field` of state (KEYS[1]) as HGET reads it, or false when it is missing or
-- the key holds another type. A value longer than any minitask writes there
-- (FIELD_MOST; another's: a 50 MB audit planted) is deleted, said once in Redis's
-- log, and read as missing (each field as its header says then: a seq as the high
-- water, a limit as none, the audit from the first place): read whole once, by the
-- first script that meets it, never again. (Lengths read first would cost every
-- pull a command a field: a tenth more; and tonumber() reads '5' followed by 50 MB
-- of spaces as 5, which would never be rewritten.)
local function state_of(field)
  local value = tolerant(false, 'HGET', KEYS[1], field)
  if not value or #value <= FIELD_MOST then return value end
  tolerant(0, 'HDEL', KEYS[1], field)
  redis.log(redis.LOG_WARNING, 'minitask: deleted field ' .. field .. ' of ' .. KEYS[1] .. ', '
            .. #value .. ' bytes long: no value minitask writes there (' .. FIELD_MOST
            .. ' bytes at most); read as missing')
  return false
end

-- A cursor as read (`raw`: a value of cursors, or false), or false for one longer
-- than any minitask writes (FIELD_MOST), which is no call sequence either: read
-- whole, it would cost every script that reads it (another subscriber's, at each
-- pull) its copy. Such a cursor of `name` is set to 0 (said once in Redis's log): a
-- sequence minitask writes, from which that subscriber's next pull takes the oldest
-- call still logged, as it does for any cursor that is no sequence (at least once).
local function cursor_of(name, raw)
  if not raw or #raw <= FIELD_MOST then return raw end
  tolerant(0, 'HSET', KEYS[5], name, '0')
  redis.log(redis.LOG_WARNING, (string.gsub(
    'minitask: set the cursor of ' .. string.sub(name, 1, 64) .. ' in ' .. KEYS[5] .. ', '
    .. #raw .. ' bytes long, to 0: no call sequence; that subscriber restarts from the'
    .. ' oldest call still logged', '[^ -~]',
    function(byte) return string.format('\\x%02x', string.byte(byte)) end)))
  return '0'
end

-- The longest subscriber name (300 characters of up to 4 bytes: broadcast_reads.py's
-- NAME_BYTES) or call id (200 bytes) minitask writes in a subscriber index (places,
-- since, alive), a field name of cursors, or a member of the log or joins.
local NAME_MOST = 1200

-- The reply `listed` of `key` (`step` 2: member, score or field, value pairs; 1:
-- members), kept to the members no longer than NAME_MOST: a longer one (planted: a 50
-- MB name made every send copy it, for ever) is removed where it is met (ZREM, or
-- `command`: lib.lua's bounded_members), said once (it is gone) in Redis's log with its
-- length, and never copied into another key.
local function short_only(key, listed, step, command)
  local long = false
  for i = 1, #listed, step do
    if #listed[i] > NAME_MOST then long = true break end
  end
  if not long then return listed end  -- (what nearly every call meets: nothing made)
  local removed = {}
  local kept = bounded_members(key, listed, step, NAME_MOST, removed, command)
  for _, length in ipairs(removed) do
    redis.log(redis.LOG_WARNING, 'minitask: removed a member of ' .. key .. ', ' .. length ..
              ' bytes long: longer than any name minitask writes there (' .. NAME_MOST ..
              ' bytes at most)')
  end
  return kept
end

-- The members `read` (`step` 2: member, score pairs; 1: members) of ZSET `key`, read
-- by rank from its lowest (`sign` 1: ZRANGEBYSCORE -inf .. LIMIT 0 n, the i-th at rank
-- i - 1) or its highest (`sign` -1: ZREVRANGEBYSCORE +inf ..: at rank -i), kept to
-- those no longer than NAME_MOST. A longer one (no subscriber: planted, 50 MB) is
-- removed by its rank (ZREMRANGEBYRANK), said once with its length: never passed back
-- to Redis (a prune that looked it up in seen and forgot it everywhere passed it six
-- times: 2.6 s of Redis, against about a second to read it, which no command spares).
-- The farthest from the end read from goes first, so that no removal moves a rank
-- still to remove.
local function by_rank_short(key, read, step, sign)
  local kept = read
  for i = #read - step + 1, 1, -step do
    if #read[i] > NAME_MOST then
      if kept == read then
        kept = {}
        for j = 1, #read do kept[j] = read[j] end
      end
      local rank = sign * ((i - 1) / step) + (sign < 0 and -1 or 0)
      redis.pcall('ZREMRANGEBYRANK', key, rank, rank)
      redis.log(redis.LOG_WARNING, 'minitask: removed a member of ' .. key .. ', ' .. #read[i]
                .. ' bytes long: longer than any name minitask writes there (' .. NAME_MOST
                .. ' bytes at most)')
      for _ = 1, step do table.remove(kept, i) end
    end
  end
  return kept
end

-- `command key ...` (a read of one member and its score), read again while what it
-- returns is a member longer than NAME_MOST (removed: short_only), PLACE_BATCH times at
-- most: the member and score that stand there once such members are gone.
local function short_read(command, key, ...)
  for _ = 1, PLACE_BATCH do
    local read = tolerant({}, command, key, ...)
    if not (read[1] and #read[1] > NAME_MOST) then return read end
    short_only(key, read, 2)
  end
  return {}
end

-- Run `command key id...` over `ids` a thousand at a time: Lua's unpack
-- fails past about 8,000 values, and a send may drop more than that.
local function per_thousand(command, key, ids)
  for first = 1, #ids, 1000 do
    tolerant(0, command, key, unpack(ids, first, math.min(first + 999, #ids)))
  end
end

-- Forget calls of the log: their bodies and send times go with them.
local function forget_calls(ids)
  per_thousand('ZREM', KEYS[2], ids)
  per_thousand('HDEL', KEYS[3], ids)
  per_thousand('HDEL', KEYS[4], ids)
end

-- The highest call sequence the `keys` (sorted sets: the log, places, since or
-- joins) show, 0 for none: one ZRANGE -1 -1 each; where that is no sequence (inf,
-- 1e300: another's data, hiding none below it), the highest score from 0 to
-- MAX_SCORE (a fraction counts as the sequence above it). What state's seq is read
-- as when it is missing (deleted, evicted) or no sequence (1e400, nan, -1, 1.5), or
-- is below it: no sequence at or below one a cursor or the log has seen is handed out.
-- A member longer than NAME_MOST met there is removed (short_read), never read again.
local function high_water(keys)
  local top = 0
  for _, key in ipairs(keys) do
    local last = short_read('ZRANGE', key, -1, -1, 'WITHSCORES')
    local n = guards().whole(last[2], 0, MAX_SCORE)
    if last[2] and not n then
      last = short_read('ZREVRANGEBYSCORE', key, string.format('%.0f', MAX_SCORE), 0,
                        'WITHSCORES', 'LIMIT', 0, 1)
      n = math.ceil(tonumber(last[2]) or 0)
    end
    top = math.max(top, n or 0)
  end
  return top
end

-- A subscriber's cursor moves: the hash (the truth) and the index with it.
local function set_cursor(name, cursor)
  local value = string.format('%.0f', cursor)
  redis.call('HSET', KEYS[5], name, value)
  tolerant(0, 'ZADD', KEYS[7], value, name)
end

-- A subscriber leaves: unsubscribed, or pruned (not seen past broadcast_ttl).
local function forget_subscriber(name)
  local removed = tolerant(0, 'HDEL', KEYS[5], name)
  tolerant(0, 'HDEL', KEYS[6], name)
  tolerant(0, 'HDEL', KEYS[1], 'ahead:' .. name)  -- (set_back_ahead's, unsaid)
  for i = 7, 9 do tolerant(0, 'ZREM', KEYS[i], name) end
  return removed
end

-- A worker of `name` is alive: seen at `now` (ms, the caller's clock, shown to
-- users), alive on the server's clock (the prune's), never set back.
local function seen_at(name, now)
  tolerant(0, 'HSET', KEYS[6], name, now)
  tolerant(0, 'ZADD', KEYS[9], 'GT', string.format('%.0f', server_ms()), name)
end

-- The field of state where a cursor set back as ahead (set_back_ahead) waits for its
-- subscriber's pull, which says so in the worker's log and deletes it.
local function ahead_field(name)
  return 'ahead:' .. name
end

-- `name`'s cursor `cursor` is past `last`, the last call sequence handed out before
-- this script, or (`place` true: `place_past`) past its place in the index, which
-- set_cursor writes with it: no pull wrote it (data minitask did not write; planted).
-- Kept, it would take the next calls for pulled ones (they never run for that
-- subscriber, and a send would delete them as pulled). It is set back to its place in
-- the index (`place`, as read: what minitask last wrote for it), or, when that is no
-- sequence up to `last`, to just before the oldest call still logged (at least once:
-- a call it ran may run again, none is lost); said once in Redis's log, and kept in
-- state (ahead_field: was, back, and 'place' when it was past its place) for that
-- subscriber's pull to say in the worker's log. Returns the cursor set.
local function set_back_ahead(name, cursor, place, last, place_past)
  local back = guards().whole(place, 0, last)
  if not back then
    local oldest = tolerant({}, 'ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
    oldest = oldest and guards().whole(oldest, 1, last)
    back = oldest and oldest - 1 or last
  end
  set_cursor(name, back)
  local said = string.format('%.0f', cursor) .. ' ' .. string.format('%.0f', back)
  tolerant(0, 'HSET', KEYS[1], ahead_field(name), said .. (place_past and ' place' or ''))
  local past = place_past and ('past its place ' .. string.format('%.0f', back) .. ' in ' ..
                               KEYS[7] .. ', which minitask writes with it')
    or ('past the last call sequence ' .. string.format('%.0f', last))
  redis.log(redis.LOG_WARNING, (string.gsub(
    'minitask: the cursor of ' .. string.sub(name, 1, 64) .. ' in ' .. KEYS[5] .. ' was ' ..
    string.format('%.0f', cursor) .. ', ' .. past .. ' (no pull wrote it); set back to ' ..
    string.format('%.0f', back) .. ', so that it takes no later call for a pulled one',
    '[^ -~]', function(byte) return string.format('\\x%02x', string.byte(byte)) end)))
  return back
end

-- A scan cursor read back from state: the decimal digits HSCAN returns, else
-- nil (HSCAN would fail on another's text, failing the script).
local function scan_cursor(value)
  if type(value) == 'string' and #value <= 18 and string.match(value, '^%d+$') then
    return value
  end
  return nil
end

-- Index cursors an older minitask wrote to the hash only (or one still running
-- beside this one, in a rolling deploy): INDEX_BATCH a call, by HSCAN from state's
-- scan. Returns true once the index is whole: a scan begun at 0 came back to 0
-- (state's indexed; HSCAN returns every field held from its first call to its
-- last), and the hash has no more fields than the index (more: an older worker
-- subscribed since, and a scan starts again). Counting alone cannot tell it
-- whole: an index entry the hash no longer has hides a cursor it lacks. A second
-- value true says it was whole already (this call indexed nothing). With a
-- places or state of another type nothing is indexed (every call is kept). A cursor
-- past the last sequence handed out (no pull wrote it: planted) is set back as it is
-- indexed (set_back_ahead), so that the next send does not start again above it.
local function indexed()
  local count = tolerant(0, 'HLEN', KEYS[5])
  if state_of('indexed') then
    if tolerant(0, 'ZCARD', KEYS[7]) >= count then return true, true end
    tolerant(0, 'HDEL', KEYS[1], 'indexed')
  end
  if not (guards().fits(KEYS[7], 'zset') and guards().fits(KEYS[1], 'hash')) then
    return false
  end
  local at = scan_cursor(state_of('scan')) or '0'
  local page = tolerant(false, 'HSCAN', KEYS[5], at, 'COUNT', INDEX_BATCH) or {'0', {}}
  local now = server_ms()
  -- a field name longer than any subscriber's is no subscriber: removed (HDEL), never
  -- indexed (a 50 MB name copied into places, since and alive blocked Redis 6-14 s)
  local fields = short_only(KEYS[5], page[2], 2, 'HDEL')
  local ceiling  -- the last sequence handed out, read once (when a cursor is above 0)
  for i = 1, #fields, 2 do
    local name = fields[i]
    local cursor = guards().whole(fields[i + 1], 0, MAX_SCORE) or 0
    if cursor > 0 and ceiling == nil then
      local seq = guards().whole(state_of('seq'), 0, MAX_SCORE)
      ceiling = seq and math.max(seq, high_water({KEYS[2], KEYS[7], KEYS[8]})) or false
    end
    -- one past it no pull wrote (planted): set back, never indexed as where the log is
    if ceiling and cursor > ceiling then
      cursor = set_back_ahead(name, cursor, false, ceiling)
    end
    -- LT: a place is never raised to the hash's cursor (one above it no pull wrote:
    -- the subscriber's pull sets it back to the place); a new one is added
    tolerant(0, 'ZADD', KEYS[7], 'LT', string.format('%.0f', cursor), name)
    -- subscribed before every call sent since (the calls before have their names)
    tolerant(0, 'ZADD', KEYS[8], 'NX', 0, name)
    tolerant(0, 'ZADD', KEYS[9], 'NX', now, name)
  end
  if page[1] ~= '0' then
    tolerant(0, 'HSET', KEYS[1], 'scan', page[1])
    return false
  end
  tolerant(0, 'HDEL', KEYS[1], 'scan')
  tolerant(0, 'HSET', KEYS[1], 'indexed', '1')
  return tolerant(0, 'ZCARD', KEYS[7]) >= tolerant(0, 'HLEN', KEYS[5])
end

-- What tolerant() returns for a read of a key of another type (no reply is it).
local REFUSED = {}

-- `name`'s cursor as the hash (the truth) says, its index entry (`score`, as read)
-- set back to it when they differ (a cursor above an entry that is a sequence is
-- set back to the entry instead: no pull wrote it); nil when it cannot be told, and the caller then
-- keeps every call: the hash has no cursor for it (an entry an older minitask's
-- unsubscribe left: dropped, and the next script scans the hash again before
-- trusting the index, as that entry may have hidden a cursor the index lacks), or
-- one that is no call sequence (the entry goes to 0, keeping every call until that
-- subscriber's pull restarts it), or the hash is of another type (nothing written).
local function place_of(name, score, ahead_of)
  local raw = tolerant(REFUSED, 'HGET', KEYS[5], name)
  if raw ~= REFUSED then raw = cursor_of(name, raw) end
  if raw == REFUSED then return nil end
  if not raw then
    tolerant(0, 'ZREM', KEYS[7], name)
    tolerant(0, 'HDEL', KEYS[1], 'indexed')
    return nil
  end
  local cursor = guards().whole(raw, 0, MAX_SCORE)
  if cursor and ahead_of and cursor > ahead_of then
    return set_back_ahead(name, cursor, score, ahead_of)
  end
  -- above its place (set_cursor writes both: no pull wrote it), set back to it, never
  -- the place raised to it (the calls between would be deleted as pulled)
  local at = guards().whole(score, 0, MAX_SCORE)
  if cursor and at and cursor > at then
    return set_back_ahead(name, cursor, at, MAX_SCORE, true)
  end
  if cursor ~= tonumber(score) then
    tolerant(0, 'ZADD', KEYS[7], string.format('%.0f', cursor or 0), name)
    redis.log(redis.LOG_WARNING, 'minitask: ' .. KEYS[7] .. ' placed a subscriber at ' ..
              string.sub(tostring(score), 1, 32) .. ', not at its cursor; indexed again' ..
              (cursor and '' or ' at 0 (its cursor is no call sequence: every call is kept)'))
  end
  return cursor
end

-- The lowest cursor of any subscriber, or nil when none subscribes; 0 (keep
-- every call) while it cannot be told: the index is incomplete, or a place cannot
-- be checked against the hash (place_of). The least place is checked against the
-- hash (the truth) and set back to its cursor, until it agrees: a place below 0
-- or a fraction (-inf, -5, 1.5: another's data) comes first. A place that hides a
-- lower cursor behind the least (inf, 1e300, or one in range) is found by
-- drop_pulled's checks (check_places()) before a call is deleted. `ahead_of` (a
-- send's last sequence before its calls; nil: none checked): a cursor past it is set
-- back (set_back_ahead), never taken as the least. `known`: the least place, read
-- and found to agree with its cursor by this script (set_back_cursors_ahead).
local function least_cursor(ahead_of, known)
  local whole, settled = indexed()
  if not whole then
    return tolerant(0, 'HLEN', KEYS[5]) > 0 and 0 or nil
  end
  if known and settled then return known end  -- (nothing indexed since it was read)
  for _ = 1, PLACE_BATCH do
    local first = tolerant({}, 'ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
    if #first == 0 then
      return tolerant(0, 'HLEN', KEYS[5]) > 0 and 0 or nil
    end
    local cursor = place_of(first[1], first[2], ahead_of)
    if not cursor then return 0 end
    if cursor == tonumber(first[2]) then return cursor end
  end
  return 0
end

-- Check the places against the hash before a call is deleted: those past `last`
-- (the last sequence handed out; nil: state's seq), inf or 1e300, at most
-- PLACE_BATCH of them, and PLACE_BATCH more from state's audit on (by rank; back
-- to 0 past the last: a queue of PLACE_BATCH subscribers or fewer has every place
-- checked). Each that is not its subscriber's cursor is set back to it (place_of).
-- Past `last`, every place is caught; one in range that hides a lower cursor (a
-- fraction, or a whole number above it) among n subscribers is found within
-- n / PLACE_BATCH deletes: no script reads every subscriber (and that
-- subscriber's next pull writes its place again).
-- Returns whether one was (the least is read again), and whether the least can
-- be trusted at all (false: more places past `last` than checked, or one whose
-- cursor cannot be told: every call is kept). A cursor found past `ahead_of` (as
-- least_cursor's) is set back (set_back_ahead).
local function check_places(last, ahead_of)
  last = last or guards().whole(state_of('seq'), 0, MAX_SCORE)
    or MAX_SCORE
  local past = tolerant({}, 'ZRANGEBYSCORE', KEYS[7], string.format('(%.0f', last), '+inf',
                        'WITHSCORES', 'LIMIT', 0, PLACE_BATCH)
  local sure = #past < 2 * PLACE_BATCH
  local changed = false
  for i = 1, #past, 2 do
    -- a cursor past a seq set back by hand is its own: left as it is
    local cursor = place_of(past[i], past[i + 1], ahead_of)
    if not cursor then sure = false end
    changed = changed or cursor ~= tonumber(past[i + 1])
  end
  local at = guards().whole(state_of('audit'), 0, MAX_SCORE) or 0
  local page = tolerant({}, 'ZRANGE', KEYS[7], at, at + PLACE_BATCH - 1, 'WITHSCORES')
  local next_at = #page < 2 * PLACE_BATCH and 0 or at + PLACE_BATCH
  if next_at ~= at then tolerant(0, 'HSET', KEYS[1], 'audit', next_at) end
  if #page == 0 then return changed, sure end
  local names = {}
  for i = 1, #page, 2 do names[#names + 1] = page[i] end
  local cursors = tolerant(REFUSED, 'HMGET', KEYS[5], unpack(names))
  if cursors == REFUSED then return changed, false end
  for i, name in ipairs(names) do
    local score = page[2 * i]
    if guards().whole(cursor_of(name, cursors[i]), 0, MAX_SCORE) ~= tonumber(score) then
      if not place_of(name, score, ahead_of) then sure = false end
      changed = true
    end
  end
  return changed, sure
end

-- Before a send's calls take their sequences: the cursors of the PLACE_BATCH least
-- places (every subscriber of a queue of PLACE_BATCH or fewer) read, and one past
-- `last` (the last sequence handed out, at least every place: no place is past it)
-- set back (set_back_ahead). Every send pays it: it returns the least cursor when
-- the least place agrees with it and none was set back (drop_pulled's `least`, which
-- then reads neither again), else nil. In a larger queue check_places() finds the
-- others as its audit goes on.
local function set_back_cursors_ahead(last)
  local page = tolerant({}, 'ZRANGE', KEYS[7], 0, PLACE_BATCH - 1, 'WITHSCORES')
  if #page == 0 then return nil end
  local names = {}
  for i = 1, #page, 2 do names[#names + 1] = page[i] end
  local cursors = tolerant(REFUSED, 'HMGET', KEYS[5], unpack(names))
  if cursors == REFUSED then return nil end
  local least = cursors[1] and #cursors[1] <= FIELD_MOST and guards().whole(cursors[1], 0, last)
  if least ~= tonumber(page[2]) then least = nil end
  for i, name in ipairs(names) do
    local value = cursors[i]
    -- (one longer than minitask writes is cursor_of's, a number that is no
    -- sequence, inf or 1e300, place_of's: each is read as no sequence)
    if value and #value <= FIELD_MOST and (tonumber(value) or 0) > last then
      local cursor = guards().whole(value, 0, MAX_SCORE)
      if cursor then
        set_back_ahead(name, cursor, page[2 * i], last)
        least = nil
      end
    end
  end
  return least or nil
end

-- Forget at most PRUNE_BATCH subscribers not seen for longer than `ttl` (ms; at
-- least state's prune_ttl and PRUNE_FLOOR) and the grace, on the server's clock;
-- their calls would have been dropped by the ttl anyway. One whose seen is
-- fresh (an older minitask's worker renews only that; no later than the server's
-- clock and the grace) is indexed again instead, alive at seen or the server's now.
-- One that comes back subscribes anew, from the last call sent. Returns how
-- many went, and state's prune_ttl as read (0 when none).
-- Alive is another's data where it is no time of the server's clock: one that is
-- no whole number (-inf, 1.5) says nothing, and when seen says nothing either (no
-- whole number, or missing) that subscriber is aged from now, not pruned with the
-- calls it has not pulled (its worker's heartbeat rewrites both). One past the
-- server's clock (inf, 1e300) never comes up stale: age_ahead() ages it.
local function prune(ttl)
  local held = guards().whole(state_of('prune_ttl'), 0, MAX_SCORE)
  local keep = math.max(held or 0, tonumber(ttl) or 0, PRUNE_FLOOR)
  local now = server_ms()
  local before = now - keep - PRUNE_GRACE
  local stale = by_rank_short(KEYS[9], tolerant({}, 'ZRANGEBYSCORE', KEYS[9], '-inf',
                                                 string.format('(%.0f', before), 'WITHSCORES',
                                                 'LIMIT', 0, PRUNE_BATCH), 2, 1)
  local gone = 0
  for i = 1, #stale, 2 do
    local name = stale[i]
    local seen = guards().whole(tolerant(false, 'HGET', KEYS[6], name), 0, MAX_SCORE)
    -- fresh only up to the server's clock and the grace: a seen in the future (a
    -- worker clock ahead, another's data) keeps no dead subscriber for ever
    if seen and seen >= before and seen <= now + PRUNE_GRACE then
      tolerant(0, 'ZADD', KEYS[9], string.format('%.0f', math.min(seen, now)), name)
    elseif not seen and not guards().whole(stale[i + 1], 0, MAX_SCORE) then
      tolerant(0, 'ZADD', KEYS[9], string.format('%.0f', now), name)
    else
      forget_subscriber(name)
      gone = gone + 1
    end
  end
  if gone > 0 then
    redis.log(redis.LOG_NOTICE, 'minitask: ' .. gone .. ' subscriber(s) of ' .. KEYS[5] ..
              ' not seen for longer than broadcast_ttl were pruned')
  end
  return gone, held or 0
end

-- Alive entries past the server's clock and the grace (another's data: inf,
-- 1e300) would never come up stale, keeping a dead subscriber for ever: at most
-- PRUNE_BATCH of them, of alive `key`, are aged from the server's now (a heartbeat
-- and a subscribe call it: no hot script pays the read).
local function age_ahead(key)
  local now = server_ms()
  local ahead = by_rank_short(key, tolerant({}, 'ZREVRANGEBYSCORE', key, '+inf',
                                            string.format('(%.0f', now + PRUNE_GRACE), 'LIMIT',
                                            0, PRUNE_BATCH), 1, -1)
  for _, name in ipairs(ahead) do
    tolerant(0, 'ZADD', key, string.format('%.0f', now), name)
  end
end

-- Push `tokens` tokens on wake list `key`, kept under `cap` (one of another type
-- gets none). Returns whether the list held tokens already: each idle worker of its
-- subscriber blocks on it and takes a token at once, so none waits there (busy, or
-- gone) and none will pull soon to wake the subscriber's children.
local function push_wake(key, tokens, cap)
  local pushed = {}
  for i = 1, math.min(tokens, cap) do pushed[i] = '1' end
  local kept = tolerant(0, 'RPUSH', key, unpack(pushed))
  if kept > cap then tolerant(0, 'LTRIM', key, 0, cap - 1) end
  return kept > #pushed
end

-- `read(index)` (ZREVRANGE, ZREVRANK through tolerant(REFUSED, ...)) of the index the
-- wake tree ranks subscribers by: since (KEYS[8]), the newest subscribed first; while
-- since holds another type (data minitask did not write, read as no subscriber),
-- places (KEYS[7]) instead, so that sends still wake subscribers at once (with since
-- of another type they woke nobody: each pulled only at its wait's end, within 5 s,
-- until the key was fixed). A send and a pull rank by the same index (a place moves
-- with its cursor, so the tree is looser then: a subscriber missed pulls at its
-- wait's end, as ever). Returns the index read and its reply (`instead` for one of
-- another type). Costs no command more while since is a zset.
local wake_by
local function wake_read(instead, read)
  local key = wake_by or KEYS[8]
  local reply = read(key)
  if reply == REFUSED and key == KEYS[8] then
    key = KEYS[7]
    reply = read(key)
  end
  wake_by = key
  if reply == REFUSED then return key, instead end
  return key, reply
end

-- Wake the lanes of the subscribers ranked `from` to `from + WAKE_FANOUT - 1`
-- (wake_from's): each added to `woken`, or to `missed` where its wake list was not
-- declared; with `busy`, the ranks of those whose list held tokens already. Returns
-- how many there were.
local function wake_range(from, tokens, cap, declared, woken, missed, busy)
  local index, read = wake_read({}, function(key)
    return tolerant(REFUSED, 'ZREVRANGE', key, from, from + WAKE_FANOUT - 1)
  end)
  local names = short_only(index, read, 1)
  for i, name in ipairs(names) do
    woken[#woken + 1] = name
    if not declared[name] then missed[#missed + 1] = name
    elseif push_wake(declared[name], tokens, cap) and busy then busy[#busy + 1] = from + i - 1 end
  end
  return #names
end

-- Wake the lanes of the subscribers ranked `first` to `first + WAKE_FANOUT - 1`,
-- the newest subscribed first, with `tokens` tokens each. Only a lane whose wake
-- list the caller declared is woken: KEYS[keys_at..] are wake lists, ARGV[names_at..]
-- the subscribers they are of (the caller's guess of who is woken: the last
-- reply's). A woken lane whose list held tokens already (push_wake: no worker of
-- it waits) has its children woken here too, for the first BUSY_RELAYS such lanes:
-- a busy subscriber would wake them only once a slot of it frees. Returns who was
-- to be woken and who of them was not (their lists were not declared): the caller
-- wakes those (broadcast_wake.lua) and declares them next time.
-- A member of since longer than any subscriber name (short_only: planted, 50 MB) is
-- removed, never woken nor sent: no lane is its, and the reply would carry it to
-- every sender.
local function wake_from(first, tokens, cap, keys_at, names_at)
  if tokens <= 0 then return {}, {} end
  local base = string.sub(KEYS[1], 1, #KEYS[1] - #'bcast:state')
  local declared = {}
  for i = keys_at, #KEYS do
    local name = ARGV[names_at + i - keys_at]
    -- the caller's key must be that subscriber's wake list (compared, never used
    -- otherwise: no script touches a key it was not given)
    if name and KEYS[i] == base .. 'lane:' .. name .. ':wake' then declared[name] = KEYS[i] end
  end
  local woken, missed, busy = {}, {}, {}
  -- fewer than WAKE_FANOUT: no subscriber ranks after them, so none has children
  if wake_range(first, tokens, cap, declared, woken, missed, busy) == WAKE_FANOUT then
    for i = 1, math.min(#busy, BUSY_RELAYS) do
      if wake_range(WAKE_FANOUT * (busy[i] + 1), tokens, cap, declared, woken, missed) <
         WAKE_FANOUT then break end
    end
  end
  return woken, missed
end

-- Delete the calls every subscriber has pulled (all of them when none
-- subscribes), at most `limit` per call: each lane holds its own copy. `last`: the
-- last sequence handed out (nil: state's seq). Before any is deleted the places
-- are checked (check_places()): a call is kept while a subscriber that has not pulled
-- it may exist. A script that deletes none reads the least place only. `ahead_of`,
-- `known`: as least_cursor's.
local function drop_pulled(limit, last, ahead_of, known)
  local least = least_cursor(ahead_of, known)
  for pass = 1, 2 do
    local upto = least and string.format('%.0f', least) or '+inf'
    local ids = tolerant({}, 'ZRANGEBYSCORE', KEYS[2], '-inf', upto, 'LIMIT', 0, limit)
    if pass == 2 or not least or #ids == 0 then return forget_calls(ids) end
    local changed, sure = check_places(last, ahead_of)
    if not sure then return end
    if not changed then return forget_calls(ids) end
    least = least_cursor(ahead_of)  -- a place was set back to its cursor: read again
  end
end

-- Drop the oldest calls beyond `maxlen`, and those sent before `now - ttl`, at
-- most `limit` per call; the highest sequence dropped goes to state's dropped, so a
-- subscriber behind it learns how many it missed.
local function drop_over(now, maxlen, ttl, limit)
  local over = tonumber(tolerant(0, 'ZCARD', KEYS[2])) - maxlen
  local ids, last, kept = {}, nil, false
  -- Read the calls over maxlen and the next one, then a hundred at a time while
  -- they are past the ttl: a send behind a long log reads about what it drops,
  -- not a whole batch.
  local size = math.max(over, 0) + 1
  while not kept and #ids < limit do
    local from = #ids  -- nothing is removed yet: the next unread call has this rank
    local page = tolerant({}, 'ZRANGE', KEYS[2], from, from + math.min(size, limit - from) - 1,
                          'WITHSCORES')
    if #page == 0 then break end
    for i = 1, #page, 2 do
      -- a send time that is no time (nan, text) is read as missing: past the ttl
      local sent = guards().whole(tolerant(false, 'HGET', KEYS[4], page[i]), 0, MAX_SCORE)
      if #ids >= over and sent and sent >= now - ttl then
        kept = true
        break
      end
      ids[#ids + 1] = page[i]
      -- a score that is no call sequence (inf, 1.5: another's) is dropped, not recorded
      last = guards().whole(page[i + 1], 0, MAX_SCORE) or last
    end
    size = 100
  end
  if last then
    local before = guards().whole(state_of('dropped'), 0, MAX_SCORE) or 0
    if last > before then tolerant(0, 'HSET', KEYS[1], 'dropped', string.format('%.0f', last)) end
  end
  forget_calls(ids)
end
