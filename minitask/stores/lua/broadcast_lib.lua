-- broadcast_lib: what the broadcast scripts share (stores/broadcast.py puts it
-- after lib.lua, in front of each broadcast_*.lua).
-- Every broadcast script takes the same first nine keys of a queue:
-- KEYS[1] bcast:state (HASH: seq, the last call sequence handed out; dropped, the
--   last sequence dropped unpulled; maxlen, ttl: the last send's limits; scan: where
--   indexing cursors written by an older minitask goes on)
-- KEYS[2] bcast:log (ZSET id -> seq)
-- KEYS[3] bcast:bodies (HASH)  KEYS[4] bcast:sent (HASH id -> ms)
-- KEYS[5] bcast:cursors (HASH subscriber -> seq: each subscriber's cursor, the truth)
-- KEYS[6] bcast:seen (HASH subscriber -> ms)
-- KEYS[7] bcast:places (ZSET subscriber -> its cursor: the least is ZRANGE 0 0)
-- KEYS[8] bcast:since (ZSET subscriber -> the seq it subscribed after: join()'s who)
-- KEYS[9] bcast:alive (ZSET subscriber -> ms last seen: the stale are pruned first)
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
-- Lanes a pull or a send wakes at most: wake-ups spread as a tree over the
-- subscribers, the newest subscribed first (a send wakes the first WAKE_FANOUT, a
-- subscriber that pulled calls wakes its WAKE_FANOUT children). Newest first: the
-- subscribers gone for good (old pod names, until pruned) are the oldest, at the
-- leaves, where they hold up nobody; one whose parent is down pulls at its next
-- wait's end anyway (at most 5 s).
local WAKE_FANOUT = 16

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

-- A worker of `name` is alive at `now` (ms).
local function seen_at(name, now)
  tolerant(0, 'HSET', KEYS[6], name, now)
  tolerant(0, 'ZADD', KEYS[9], now, name)
end

-- Index cursors an older minitask wrote to the hash only (or one still running
-- beside this one, in a rolling deploy): INDEX_BATCH a call, by HSCAN. Returns
-- true while some cursor is left out of the index (its least is then unknown).
local function indexed()
  local count = tolerant(0, 'HLEN', KEYS[5])
  if tolerant(0, 'ZCARD', KEYS[7]) >= count then return true end
  local at = tolerant(false, 'HGET', KEYS[1], 'scan') or '0'
  local page = tolerant(false, 'HSCAN', KEYS[5], at, 'COUNT', INDEX_BATCH) or {'0', {}}
  local now = redis.call('TIME')[1] * 1000
  local fields = page[2]
  for i = 1, #fields, 2 do
    local name = fields[i]
    tolerant(0, 'ZADD', KEYS[7], guards().whole(fields[i + 1], 0, MAX_SCORE) or 0, name)
    -- subscribed before every call sent since (the calls before have their names)
    tolerant(0, 'ZADD', KEYS[8], 'NX', 0, name)
    local seen = guards().whole(tolerant(false, 'HGET', KEYS[6], name), 0, MAX_SCORE)
    tolerant(0, 'ZADD', KEYS[9], 'NX', seen or now, name)
  end
  if page[1] == '0' then tolerant(0, 'HDEL', KEYS[1], 'scan')
  else tolerant(0, 'HSET', KEYS[1], 'scan', page[1]) end
  return tolerant(0, 'ZCARD', KEYS[7]) >= count
end

-- The lowest cursor of any subscriber, or nil when none subscribes; 0 (keep
-- every call) while the index is incomplete. An index entry the hash no longer
-- has (an older minitask unsubscribed it) is dropped as it comes first.
local function least_cursor()
  if not indexed() then return 0 end
  for _ = 1, 8 do
    local first = tolerant({}, 'ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
    if #first == 0 then return nil end
    if tolerant(0, 'HEXISTS', KEYS[5], first[1]) == 1 then
      return guards().whole(first[2], 0, MAX_SCORE) or 0
    end
    tolerant(0, 'ZREM', KEYS[7], first[1])
  end
  return 0
end

-- Forget at most PRUNE_BATCH subscribers not seen since `now - ttl` (and the
-- grace); their calls would have been dropped by the ttl anyway. One that comes
-- back subscribes anew, from the last call sent. Returns how many went.
local function prune(now, ttl)
  if not (now and ttl) then return 0 end
  local stale = tolerant({}, 'ZRANGEBYSCORE', KEYS[9], '-inf',
                         string.format('(%.0f', now - ttl - PRUNE_GRACE), 'LIMIT', 0, PRUNE_BATCH)
  for _, name in ipairs(stale) do forget_subscriber(name) end
  if #stale > 0 then
    redis.log(redis.LOG_NOTICE, 'minitask: ' .. #stale .. ' subscriber(s) of ' .. KEYS[5] ..
              ' not seen for longer than broadcast_ttl were pruned')
  end
  return #stale
end

-- Wake the lanes of the subscribers ranked `first` to `first + WAKE_FANOUT - 1`,
-- the newest subscribed first, with `tokens` tokens each (a lane's wake list is kept
-- under `cap`; one of another type gets none).
local function wake_from(first, tokens, cap)
  if tokens <= 0 then return end
  local base = string.sub(KEYS[1], 1, #KEYS[1] - #'bcast:state')
  local names = tolerant({}, 'ZREVRANGE', KEYS[8], first, first + WAKE_FANOUT - 1)
  local pushed = {}
  for i = 1, math.min(tokens, cap) do pushed[i] = '1' end
  for _, name in ipairs(names) do
    local key = base .. 'lane:' .. name .. ':wake'
    local kept = tolerant(0, 'RPUSH', key, unpack(pushed))
    if kept > cap then tolerant(0, 'LTRIM', key, 0, cap - 1) end
  end
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
