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
-- counts as empty where read; a count that is no whole number (nan, inf, 1.5) is
-- read as missing, a cursor as 0 when dropping pulled calls (none is lost).

-- Subscribers pruned per script at most, and cursors of an older layout indexed.
local PRUNE_BATCH, INDEX_BATCH = 16, 200
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
-- wait's end anyway (at most 5 s).
local WAKE_FANOUT = 16

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
-- joins) show, 0 for none: one ZRANGE -1 -1 each. What state's seq is read as when
-- it is missing (deleted, evicted) or no sequence (1e400, nan, -1, 1.5), or is
-- below it: no sequence at or below one a cursor or the log has seen is handed out.
local function high_water(keys)
  local top = 0
  for _, key in ipairs(keys) do
    local last = tolerant({}, 'ZRANGE', key, -1, -1, 'WITHSCORES')
    top = math.max(top, guards().whole(last[2], 0, MAX_SCORE) or 0)
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
  for i = 7, 9 do tolerant(0, 'ZREM', KEYS[i], name) end
  return removed
end

-- A worker of `name` is alive: seen at `now` (ms, the caller's clock, shown to
-- users), alive on the server's clock (the prune's), never set back.
local function seen_at(name, now)
  tolerant(0, 'HSET', KEYS[6], name, now)
  tolerant(0, 'ZADD', KEYS[9], 'GT', string.format('%.0f', server_ms()), name)
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
-- whole: an index entry the hash no longer has hides a cursor it lacks. With a
-- places or state of another type nothing is indexed (every call is kept).
local function indexed()
  local count = tolerant(0, 'HLEN', KEYS[5])
  if tolerant(false, 'HGET', KEYS[1], 'indexed') then
    if tolerant(0, 'ZCARD', KEYS[7]) >= count then return true end
    tolerant(0, 'HDEL', KEYS[1], 'indexed')
  end
  if not (guards().fits(KEYS[7], 'zset') and guards().fits(KEYS[1], 'hash')) then
    return false
  end
  local at = scan_cursor(tolerant(false, 'HGET', KEYS[1], 'scan')) or '0'
  local page = tolerant(false, 'HSCAN', KEYS[5], at, 'COUNT', INDEX_BATCH) or {'0', {}}
  local now = server_ms()
  local fields = page[2]
  for i = 1, #fields, 2 do
    local name = fields[i]
    tolerant(0, 'ZADD', KEYS[7], guards().whole(fields[i + 1], 0, MAX_SCORE) or 0, name)
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

-- The lowest cursor of any subscriber, or nil when none subscribes; 0 (keep
-- every call) while the index is incomplete. An index entry the hash no longer
-- has (an older minitask unsubscribed it) is dropped as it comes first, and then
-- this script keeps every call (0): that entry may have hidden a cursor the index
-- lacks, and the next script scans the hash again before trusting the index.
local function least_cursor()
  if not indexed() then
    return tolerant(0, 'HLEN', KEYS[5]) > 0 and 0 or nil
  end
  local first = tolerant({}, 'ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
  if #first == 0 then
    return tolerant(0, 'HLEN', KEYS[5]) > 0 and 0 or nil
  end
  if tolerant(0, 'HEXISTS', KEYS[5], first[1]) == 1 then
    return guards().whole(first[2], 0, MAX_SCORE) or 0
  end
  tolerant(0, 'ZREM', KEYS[7], first[1])
  tolerant(0, 'HDEL', KEYS[1], 'indexed')
  return 0
end

-- Forget at most PRUNE_BATCH subscribers not seen for longer than `ttl` (ms; at
-- least state's prune_ttl and PRUNE_FLOOR) and the grace, on the server's clock;
-- their calls would have been dropped by the ttl anyway. One whose seen is
-- fresh (an older minitask's worker renews only that; no later than the server's
-- clock and the grace) is indexed again instead, alive at seen or the server's now.
-- One that comes back subscribes anew, from the last call sent. Returns how
-- many went, and state's prune_ttl as read (0 when none).
local function prune(ttl)
  local held = guards().whole(tolerant(false, 'HGET', KEYS[1], 'prune_ttl'), 0, MAX_SCORE)
  local keep = math.max(held or 0, tonumber(ttl) or 0, PRUNE_FLOOR)
  local before = server_ms() - keep - PRUNE_GRACE
  local stale = tolerant({}, 'ZRANGEBYSCORE', KEYS[9], '-inf', string.format('(%.0f', before),
                         'LIMIT', 0, PRUNE_BATCH)
  local gone = 0
  for _, name in ipairs(stale) do
    local seen = guards().whole(tolerant(false, 'HGET', KEYS[6], name), 0, MAX_SCORE)
    -- fresh only up to the server's clock and the grace: a seen in the future (a
    -- worker clock ahead, another's data) keeps no dead subscriber for ever
    if seen and seen >= before and seen <= server_ms() + PRUNE_GRACE then
      tolerant(0, 'ZADD', KEYS[9], string.format('%.0f', math.min(seen, server_ms())), name)
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

-- Push `tokens` tokens on wake list `key`, kept under `cap` (one of another type
-- gets none).
local function push_wake(key, tokens, cap)
  local pushed = {}
  for i = 1, math.min(tokens, cap) do pushed[i] = '1' end
  local kept = tolerant(0, 'RPUSH', key, unpack(pushed))
  if kept > cap then tolerant(0, 'LTRIM', key, 0, cap - 1) end
end

-- Wake the lanes of the subscribers ranked `first` to `first + WAKE_FANOUT - 1`,
-- the newest subscribed first, with `tokens` tokens each. Only a lane whose wake
-- list the caller declared is woken: KEYS[keys_at..] are wake lists, ARGV[names_at..]
-- the subscribers they are of (the caller's guess of who is woken: the last
-- reply's). Returns who was to be woken and who of them was not (their lists
-- were not declared): the caller wakes those (broadcast_wake.lua) and declares
-- them next time.
local function wake_from(first, tokens, cap, keys_at, names_at)
  if tokens <= 0 then return {}, {} end
  local names = tolerant({}, 'ZREVRANGE', KEYS[8], first, first + WAKE_FANOUT - 1)
  local base = string.sub(KEYS[1], 1, #KEYS[1] - #'bcast:state')
  local declared = {}
  for i = keys_at, #KEYS do
    local name = ARGV[names_at + i - keys_at]
    -- the caller's key must be that subscriber's wake list (compared, never used
    -- otherwise: no script touches a key it was not given)
    if name and KEYS[i] == base .. 'lane:' .. name .. ':wake' then declared[name] = KEYS[i] end
  end
  local missed = {}
  for _, name in ipairs(names) do
    if declared[name] then push_wake(declared[name], tokens, cap)
    else missed[#missed + 1] = name end
  end
  return names, missed
end

-- Delete the calls every subscriber has pulled (all of them when none
-- subscribes), at most `limit` per call: each lane holds its own copy.
local function drop_pulled(limit)
  local least = least_cursor()
  local upto = least and string.format('%.0f', least) or '+inf'
  local ids = tolerant({}, 'ZRANGEBYSCORE', KEYS[2], '-inf', upto, 'LIMIT', 0, limit)
  forget_calls(ids)
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
      local sent = tonumber(tolerant(false, 'HGET', KEYS[4], page[i]))
      if #ids >= over and sent and sent >= now - ttl then
        kept = true
        break
      end
      ids[#ids + 1] = page[i]
      last = tonumber(page[i + 1])
    end
    size = 100
  end
  if last then
    local before = guards().whole(tolerant(false, 'HGET', KEYS[1], 'dropped'), 0, MAX_SCORE) or 0
    if last > before then tolerant(0, 'HSET', KEYS[1], 'dropped', string.format('%.0f', last)) end
  end
  forget_calls(ids)
end
